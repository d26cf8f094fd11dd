"""The training engine: end to end on generated rooms, exact resume (in this process; after a
SIGKILL, slow), torchrun DDP parity, config errors, refusing to clobber a run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from pcreg.cli import main
from pcreg.engine.checkpoint import load_checkpoint
from pcreg.engine.train import lr_factor, training_history

FAST = ["experiment=synthetic_indoor", "debug=fast", "train.num_threads=1"]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    """One generated room for training and one for validation, shared by the tests."""
    from pcreg.data.synthetic.writer import write_indoor_dataset

    root = tmp_path_factory.mktemp("rooms")
    write_indoor_dataset(root, "val", 1, 1_000_000)
    write_indoor_dataset(root, "train", 1, 0)
    return root


def _params(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path, kind="geotransformer-train")["model"]


def test_fast_training_end_to_end(data_root, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *FAST, f"data.root={data_root}", f"train.out_dir={out}"]) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics["pairs"] == 2 and 0 <= metrics["registration_recall"] <= 1
    for name in (
        "last.pt",
        "best.pt",
        "run.json",
        "metrics.csv",
        "metrics.jsonl",
        "training_curves.png",
    ):
        assert (out / name).stat().st_size > 0, name
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["model"]["init_dim"] == 8 and run["git_commit"]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "train"] == [1, 2, 3, 4, 5, 6]
    assert len([r for r in rows if r["split"] == "val"]) == 2
    # training_curves.png (drawn by the command) plots both epochs' validation
    history = training_history(out)
    assert history["epoch"] == [1, 2]
    assert history["val_registration_recall"][-1] == metrics["registration_recall"]
    assert any(p.name.startswith("events") for p in (out / "tb").iterdir())
    # a second run into the same directory is refused (exit 2), resume is the way on
    assert main(["train", *FAST, f"data.root={data_root}", f"train.out_dir={out}"]) == 2
    assert "train.resume=true" in capsys.readouterr().err


def test_misspelt_key_fails_fast_naming_it(capsys):
    start = time.perf_counter()
    assert main(["train", *FAST, "optim.lrate=0.1"]) == 2
    assert time.perf_counter() - start < 5
    assert "optim.lrate" in capsys.readouterr().err


def test_unreadable_checkpoint_is_a_clear_error(data_root, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "last.pt").write_bytes(b"garbage")
    assert (
        main(
            ["train", *FAST, f"data.root={data_root}", f"train.out_dir={out}", "train.resume=true"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "last.pt" in err and "cannot read checkpoint" in err
    assert (out / "last.pt").read_bytes() == b"garbage"  # never overwritten


def test_lr_schedules():
    from pcreg.config import OptimConfig

    c = OptimConfig(warmup_steps=10, gamma=0.5, step_epochs=2)
    assert lr_factor(0, 0, 100, c) == pytest.approx(0.1)
    assert lr_factor(50, 3, 100, c) == pytest.approx(0.5**1.5)
    c = OptimConfig(scheduler="step", gamma=0.5, step_epochs=2)
    assert lr_factor(50, 3, 100, c) == pytest.approx(0.5)
    c = OptimConfig(scheduler="cosine")
    assert lr_factor(50, 3, 100, c) == pytest.approx(0.5)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pcreg", "train", *FAST, *args]


def test_a_resumed_run_matches_an_uninterrupted_one(data_root, tmp_path, capsys):
    """The cheap twin of the next (slow) test, in this process and without a kill: one epoch,
    then ``train.resume=true`` for the second, lands on the parameters of two epochs in one
    run, exactly."""
    common = [*FAST, f"data.root={data_root}", "train.max_steps_per_epoch=2"]
    ref, split = tmp_path / "ref", tmp_path / "split"
    assert main(["train", *common, "train.epochs=2", f"train.out_dir={ref}"]) == 0
    assert main(["train", *common, "train.epochs=1", f"train.out_dir={split}"]) == 0
    assert load_checkpoint(split / "last.pt")["step"] == 2
    resumed = ["train.epochs=2", f"train.out_dir={split}", "train.resume=true"]
    assert main(["train", *common, *resumed]) == 0
    capsys.readouterr()
    a, b = _params(ref / "last.pt"), _params(split / "last.pt")
    assert load_checkpoint(split / "last.pt")["step"] == 4
    for k in a:
        assert torch.equal(a[k], b[k]), k  # exact on CPU


@pytest.mark.slow
def test_sigkill_then_resume_matches_an_uninterrupted_run(data_root, tmp_path):
    common = [
        f"data.root={data_root}",
        "train.epochs=2",
        "train.max_steps_per_epoch=4",
        "train.checkpoint_every=1",
        "train.log_every=1",
    ]
    ref = tmp_path / "ref"
    subprocess.run(_cmd(*common, f"train.out_dir={ref}"), check=True, capture_output=True)
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        _cmd(*common, f"train.out_dir={out}"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 300
    while time.time() < deadline:  # kill mid-epoch 2, once step 6 is on disk
        if (out / "last.pt").exists():
            try:
                if load_checkpoint(out / "last.pt")["step"] >= 6:
                    break
            except Exception:
                pass
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = load_checkpoint(out / "last.pt")["step"]
    assert 6 <= killed_at < 8
    subprocess.run(
        _cmd(*common, f"train.out_dir={out}", "train.resume=true"), check=True, capture_output=True
    )
    a, b = _params(ref / "last.pt"), _params(out / "last.pt")
    assert load_checkpoint(out / "last.pt")["step"] == 8
    for k in a:
        assert torch.equal(a[k], b[k]), k  # exact on CPU


def test_torchrun_two_processes_match_one_process_with_the_combined_batch(data_root, tmp_path):
    common = [
        f"data.root={data_root}",
        "train.epochs=1",
        "train.max_steps_per_epoch=3",
        "data.max_val_pairs=1",  # the parameters are compared, not the validation
    ]
    single = tmp_path / "single"  # in this process: torch and Hydra are loaded already
    assert main(["train", *FAST, *common, "data.batch_size=2", f"train.out_dir={single}"]) == 0
    ddp = tmp_path / "ddp"
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        f"--master_port={_free_port()}",
        "-m",
        "pcreg",
        "train",
        *FAST,
        *common,
        "data.batch_size=1",
        f"train.out_dir={ddp}",
    ]
    subprocess.run(torchrun, check=True, capture_output=True, timeout=600)
    a, b = _params(single / "last.pt"), _params(ddp / "last.pt")
    assert load_checkpoint(ddp / "last.pt")["step"] == 3
    worst = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    assert worst <= 1e-5, worst


def test_init_from_copies_matching_tensors_and_keeps_the_kernel(tmp_path):
    """train.init_from: a cylindrical-kernel model started from a full-frame run takes every
    weight whose name and shape agree, and keeps its own kernel points."""
    from pcreg.engine.checkpoint import save_checkpoint
    from pcreg.engine.train import _init_weights
    from pcreg.models.geotransformer import GeoTransformerConfig, build_geotransformer

    small = dict(init_dim=8, group_norm=4, hidden_dim=16, coarse_dim=16, output_dim=16)
    torch.manual_seed(0)
    source = build_geotransformer(GeoTransformerConfig(**small, rotation_invariant=True))
    path = save_checkpoint(tmp_path / "src.pt", "geotransformer-train", source.state_dict())
    torch.manual_seed(1)
    wider = {**small, "output_dim": 24}
    target = build_geotransformer(
        GeoTransformerConfig(**wider, rotation_invariant=True, invariant_kernel="cylindrical")
    )
    fresh = {k: v.clone() for k, v in target.state_dict().items()}
    _init_weights(target, path)
    got, src = target.state_dict(), source.state_dict()
    same = [k for k in got if k in src and src[k].shape == got[k].shape]
    copied = [k for k in same if "kernel_points" not in k]
    assert len(copied) > 100
    assert all(torch.equal(got[k], src[k]) for k in copied)
    kp = [k for k in got if k.endswith("kernel_points")]
    assert kp and all(torch.equal(got[k], fresh[k]) for k in kp)
    assert not torch.equal(got[kp[0]], src[kp[0]])
    # the head's width differs (24 vs 16): left as initialised
    changed = [k for k in got if k in src and src[k].shape != got[k].shape]
    assert changed and all(torch.equal(got[k], fresh[k]) for k in changed)


def test_epoch_history_pairs_each_epochs_mean_training_loss_with_its_validation(tmp_path):
    """What training_curves.png plots, from the rows of metrics.jsonl: train rows carry the
    epoch they ran in (0-based), a validation row the number of epochs done."""
    from pcreg.engine.train import epoch_history

    def val(epoch, loss, rr, ir):
        return {"step": 0, "epoch": epoch, "split": "val", "loss": loss,
                "registration_recall": rr, "inlier_ratio": ir}  # fmt: skip

    rows = [
        {"step": 1, "epoch": 0, "split": "train", "loss": 3.0},
        {"step": 2, "epoch": 0, "split": "train", "loss": 2.0},
        val(1, 1.5, 0.25, 0.1),
        {"step": 3, "epoch": 1, "split": "train", "loss": 1.0},
        val(2, 1.25, 0.5, 0.2),
        {"step": 4, "epoch": 2, "split": "train", "loss": 0.5},  # interrupted: no validation
    ]
    assert epoch_history(rows) == {
        "epoch": [1, 2],
        "train_loss": [2.5, 1.0],
        "val_loss": [1.5, 1.25],
        "val_registration_recall": [0.25, 0.5],
        "val_inlier_ratio": [0.1, 0.2],
    }
    assert epoch_history(rows[:2]) is None  # nothing validated yet
    assert training_history(tmp_path) is None  # no metrics.jsonl
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert training_history(tmp_path) == epoch_history(rows)
