"""`pcreg evaluate`: protocol arithmetic with oracle predictors, run_evaluation's checks and
outputs, and the CLI end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pcreg.cli import main
from pcreg.data.threedmatch import PairRecord, ThreeDMatchPairs
from pcreg.engine.evaluate import evaluate_pairs, format_evaluation_markdown
from pcreg.evaluation import run_evaluation
from pcreg.registration.loading import load_network
from pcreg.registration.network import Prediction


def _rot_z(deg):
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    t = np.eye(4)
    t[:2, :2] = [[c, -s], [s, c]]
    return t


class _Pairs:
    """Four pairs of one scene; src points spread in a 2 m cube."""

    def __init__(self, rng):
        self.items = []
        for k in range(4):
            src = rng.uniform(-1, 1, size=(300, 3))
            t = np.eye(4)
            t[:3, 3] = [k, 0, 0]
            ref = src @ t[:3, :3].T + t[:3, 3]
            rec = PairRecord("s", 0, k + 2, "", "", t, 0.5)
            self.items.append((src, ref, t, rec))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def test_oracle_scores_perfectly(rng):
    ds = _Pairs(rng)

    def oracle(src, ref):
        t = next(t for s, r, t, _ in ds.items if s is src)
        return Prediction(t, src[:50].astype(float), ref[:50].astype(float), np.ones(50), 0.1)

    res = evaluate_pairs(ds, oracle, progress=False)
    o = res["overall"]
    assert (o["fmr"], o["inlier_ratio"], o["registration_recall"]) == (1.0, 1.0, 1.0)
    assert o["rre_deg"] == pytest.approx(0, abs=1e-6) and o["rte_m"] == pytest.approx(0, abs=1e-9)


def test_known_errors_give_known_scores(rng):
    ds = _Pairs(rng)
    errs = [_rot_z(0.5), np.eye(4), _rot_z(60), np.eye(4)]
    errs[1][:3, 3] = [0.05, 0, 0]  # 5 cm: registered (RMSE 5 cm), IR 1 at 10 cm
    errs[3][:3, 3] = [0.5, 0, 0]  # 50 cm: fails

    def predict(src, ref):
        k = next(i for i, (s, r, t, _) in enumerate(ds.items) if s is src)
        t = ds.items[k][2] @ errs[k]
        # 20 correspondences, the first 4 wrong by 30 cm: IR = 0.8
        rc = ref[:20].astype(float).copy()
        rc[:4] += 0.3
        return Prediction(t, src[:20].astype(float), rc, np.ones(20), 0.2)

    res = evaluate_pairs(ds, predict, progress=False)
    assert [p["registered"] for p in res["pairs"]] == [True, True, False, False]
    assert res["overall"]["registration_recall"] == 0.5
    assert res["overall"]["inlier_ratio"] == pytest.approx(0.8)
    assert res["overall"]["rre_deg"] == pytest.approx(0.25, abs=1e-6)  # mean of 0.5 and 0
    assert res["overall"]["rte_m"] == pytest.approx(
        np.mean([np.linalg.norm(ds.items[0][2][:3, :3] @ errs[0][:3, 3]), 0.05]), abs=1e-9
    )
    kitti = evaluate_pairs(ds, predict, protocol="kitti", progress=False)
    assert [p["registered"] for p in kitti["pairs"]] == [True, True, False, True]


def test_cli_runs_a_checkpoint_over_a_written_dataset(tmp_path, capsys, tiny_checkpoint):
    from pcreg.data.synthetic.writer import write_indoor_dataset

    write_indoor_dataset(tmp_path / "ds", "val", num_scenes=1, seed=21)
    ckpt = tiny_checkpoint
    reg = load_network(ckpt).network
    assert reg.config.voxel_size == 0.05 and reg.config.hidden_dim == 32
    args = [
        "evaluate",
        f"checkpoint={ckpt}",
        f"dataset.root={tmp_path / 'ds'}",
        "dataset.benchmark=val",
        "limit=2",
        f"out_dir={tmp_path / 'out'}",
    ]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "| room-000021 | 2 |" in table
    assert (tmp_path / "out" / "results.md").read_text() == table  # printed = written
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(res["pairs"]) == 2 and all(p["time_s"] > 0 for p in res["pairs"])
    assert main(args) == 2  # results exist: not overwritten
    assert main(["evaluate", f"dataset.root={tmp_path}"]) == 2
    assert "checkpoint" in capsys.readouterr().err


def test_batched_prediction_scores_like_pair_by_pair_in_order(rng):
    ds = _Pairs(rng)
    errs = [_rot_z(0.5), _rot_z(30), np.eye(4), _rot_z(2)]

    def predict(src, ref):
        k = next(i for i, (s, r, t, _) in enumerate(ds.items) if s is src)
        return Prediction(ds.items[k][2] @ errs[k], src[:9].astype(float), ref[:9].astype(float),
                          np.ones(9), 0.1 * (k + 1))  # fmt: skip

    calls = []

    def predict_many(pairs):
        calls.append(len(pairs))
        return [predict(src, ref) for src, ref in pairs]

    one = evaluate_pairs(ds, predict, progress=False)
    many = evaluate_pairs(ds, None, progress=False, predict_many=predict_many, chunk=3)
    assert calls == [3, 1]  # the pairs went in chunks, the last one short
    assert many == one  # same rows in the same order, same summary
    assert [p["time_s"] for p in many["pairs"]] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    with pytest.raises(RuntimeError, match="3 predictions for 2 pairs"):
        evaluate_pairs(ds, None, progress=False, chunk=2,
                       predict_many=lambda pairs: [predict(*pairs[0])] * 3)  # fmt: skip


@pytest.mark.ray
def test_cli_evaluates_over_worker_processes(tmp_path, capsys, caplog, tiny_checkpoint):
    import logging

    from pcreg.data.synthetic.writer import write_indoor_dataset

    write_indoor_dataset(tmp_path / "ds", "val", num_scenes=1, seed=21)
    base = ["evaluate", f"checkpoint={tiny_checkpoint}", f"dataset.root={tmp_path / 'ds'}",
            "dataset.benchmark=val", "limit=3"]  # fmt: skip
    assert main([*base, f"out_dir={tmp_path / 'one'}"]) == 0
    with caplog.at_level(logging.DEBUG, logger="pcreg.batch.runner"):
        assert main([*base, "workers=2", f"out_dir={tmp_path / 'two'}"]) == 0
    assert "Ray: a local cluster with 2 CPUs" in caplog.text  # the pairs really went to Ray
    one, two = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("one", "two"))
    assert len(two["pairs"]) == 3
    for a, b in zip(one["pairs"], two["pairs"], strict=True):  # the same pairs, in order
        assert (a["ref"], a["src"], a["registered"]) == (b["ref"], b["src"], b["registered"])
        assert b["rre_deg"] == pytest.approx(a["rre_deg"], abs=0.05)
        assert b["time_s"] > 0
    capsys.readouterr()
    assert main([*base, "workers=0", f"out_dir={tmp_path / 'x'}"]) == 2
    assert main([*base, "workers=2", "device=cuda", f"out_dir={tmp_path / 'x'}"]) == 2
    assert "workers" in capsys.readouterr().err


def _eval_cfg(tmp_path, **kw):
    from pcreg.config import EvalDatasetConfig, EvaluateConfig

    dataset = EvalDatasetConfig(**kw.pop("dataset", {}))
    return EvaluateConfig(dataset=dataset, out_dir=str(tmp_path / "out"), **kw)


def test_run_evaluation_refuses_bad_settings_before_loading_the_model(tmp_path):
    from pcreg.config import ConfigError
    from pcreg.data.synthetic.writer import write_indoor_dataset
    from pcreg.errors import MissingFileError

    ds = {"root": str(tmp_path / "ds"), "benchmark": "val"}
    absent = str(tmp_path / "absent.pt")  # never read: every check fails first

    def message(**kw) -> str:
        with pytest.raises(ConfigError) as err:
            run_evaluation(_eval_cfg(tmp_path, **kw))
        return str(err.value)

    assert message(dataset=ds) == "checkpoint: give the model to evaluate: checkpoint=PATH"
    assert message(checkpoint=absent) == "dataset.root: give the dataset root: dataset.root=DIR"
    assert message(checkpoint=absent, dataset={**ds, "layout": "x"}) == (
        "dataset.layout: must be threedmatch or kitti, got 'x'"
    )
    write_indoor_dataset(tmp_path / "ds", "val", num_scenes=1, seed=21)
    assert message(checkpoint=absent, dataset=ds, workers=0) == (
        "workers: must be at least 1, got 0"
    )
    assert message(checkpoint=absent, dataset=ds, workers=2, device="cuda") == (
        "workers: worker processes are for device=cpu, not cuda"
    )
    assert not (tmp_path / "out").exists()  # nothing made, not even out_dir (it was)
    with pytest.raises(MissingFileError, match="model checkpoint not found"):
        run_evaluation(_eval_cfg(tmp_path, checkpoint=absent, dataset=ds))
    assert not (tmp_path / "out").exists()


def test_run_evaluation_returns_what_it_writes(tmp_path, tiny_checkpoint):
    from pcreg.data.synthetic.writer import write_indoor_dataset
    from pcreg.errors import OutputExistsError

    write_indoor_dataset(tmp_path / "ds", "val", num_scenes=1, seed=21)
    cfg = _eval_cfg(tmp_path, checkpoint=str(tiny_checkpoint), limit=2,
                    dataset={"root": str(tmp_path / "ds"), "benchmark": "val"})  # fmt: skip
    result = run_evaluation(cfg)
    assert [(p["scene"], p["ref"], p["src"]) for p in result["pairs"]] == [
        (r.scene, r.ref_id, r.src_id) for r in ThreeDMatchPairs(tmp_path / "ds", "val").records[:2]
    ]
    assert result["protocol"] == "threedmatch" and result["overall"]["pairs"] == 2
    out = tmp_path / "out"
    assert (out / "results.json").read_text() == json.dumps(result, indent=1)
    assert (out / "results.md").read_text() == format_evaluation_markdown(result) + "\n"
    with pytest.raises(OutputExistsError):  # refused before any work
        run_evaluation(cfg)


def _kitti_root(root, sequences, frames=2, step_m=12.0):
    """A KITTI odometry root: ``frames`` tiny scans per sequence, ``step_m`` apart along x."""
    for seq in sequences:
        velo = root / "sequences" / f"{seq:02d}" / "velodyne"
        velo.mkdir(parents=True)
        for k in range(frames):
            np.zeros((10, 4), np.float32).tofile(velo / f"{k:06d}.bin")
        (velo.parent / "calib.txt").write_text("Tr: 1 0 0 0 0 1 0 0 0 0 1 0\n")
        poses = [[1, 0, 0, step_m * k, 0, 1, 0, 0, 0, 0, 1, 0] for k in range(frames)]
        np.savetxt(velo.parent / "poses.txt", np.array(poses, np.float64))
    return root


def test_kitti_layout_takes_the_test_split_by_default_and_names_it(tmp_path, capsys):
    """dataset.layout=kitti without dataset.benchmark died with KeyError: '3DMatch' (the
    3DMatch default taken as a KITTI split), exit 1."""
    from pcreg.config import EvalDatasetConfig
    from pcreg.engine.evaluate import evaluation_dataset

    root = _kitti_root(tmp_path / "kitti", range(8))  # sequences 00-07: no test split
    argv = ["evaluate", f"checkpoint={tmp_path / 'absent.pt'}", f"dataset.root={root}",
            "dataset.layout=kitti", f"out_dir={tmp_path / 'out'}"]  # fmt: skip
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"pcreg: error: {root}: no KITTI pairs in split 'test' (sequences 08, 09, 10): none "
        "of them has sequences/NN/velodyne/*.bin; scans exist for sequences 00, 01, 02, 03, "
        "04, 05, 06, 07; choose another split: dataset.benchmark=train or "
        "dataset.benchmark=val"
    )
    _kitti_root(root, [9])
    pairs, bdir, protocol = evaluation_dataset(EvalDatasetConfig("kitti", str(root)))
    assert (pairs.split, len(pairs), bdir, protocol) == ("test", 1, None, "kitti")
    assert (pairs.records[0].seq, pairs.records[0].ref_frame) == (9, 1)


def test_existing_results_name_overwrite_true_not_force(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").write_text("{}")
    argv = ["evaluate", f"checkpoint={tmp_path / 'absent.pt'}", f"dataset.root={tmp_path}",
            f"out_dir={tmp_path / 'out'}"]  # fmt: skip
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        f"pcreg: error: {tmp_path / 'out' / 'results.json'}: already exists (add "
        "overwrite=true to replace it)"
    )
    assert (tmp_path / "out" / "results.json").read_text() == "{}"
