"""The shipped networks on ONNX Runtime (:mod:`pcreg.runtime`) give the torch network's
predictions: transforms within 1e-4 on the real pairs of ``../shared/data``, for one pair and
for the orientation search's hypotheses; the export is made once, checked, cached and rebuilt
when the weights change; ``PCREG_RUNTIME`` chooses."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pcreg.registration import onnx_loading as rt_loading
from pcreg.registration.loading import load_network
from pcreg.registration.onnx_loading import load_onnx_network

pytest.importorskip("onnxruntime")

TOLERANCE = 1e-4  # issue #44: transforms within 1e-4 of the torch path


@pytest.fixture(scope="module")
def cache():
    """The test session's export cache (conftest.py sets ``PCREG_CACHE_DIR``; the exports take
    ~10 s each, so the modules share them)."""
    from pathlib import Path

    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("PCREG_RUNTIME", raising=False)
        yield Path(__import__("os").environ["PCREG_CACHE_DIR"])


@pytest.fixture(scope="module")
def indoor(cache):
    return load_network("indoor").network, load_onnx_network("indoor").network


def _real_pair(shared_data):
    demo = shared_data / "geotransformer_repo" / "demo"
    return np.load(demo / "src.npy"), np.load(demo / "ref.npy"), np.load(demo / "gt.npy")


def _kitti(shared_data, frame):
    raw = np.fromfile(shared_data / "kitti00_scancontext" / f"{frame:06d}.bin", np.float32)
    return raw.reshape(-1, 4)[:, :3].astype(np.float64)


def _rows(pred) -> np.ndarray:
    """The correspondences as a set: ``(C, 7)`` rows (source, reference, score) sorted. Their
    order inside a patch follows the patch's point order, which differs between the runtimes
    where two points lie at the same distance from their superpoint (3DMatch's coordinates
    are quantised to 2 mm)."""
    rows = np.concatenate([pred.src_corr_points, pred.ref_corr_points,
                           pred.corr_scores[:, None]], 1)  # fmt: skip
    return rows[np.lexsort(np.round(rows, 5).T[::-1])]


def _rotation(axis, deg):
    from scipy.spatial.transform import Rotation

    return Rotation.from_rotvec(np.radians(deg) * np.asarray(axis, float)).as_matrix()


def test_real_indoor_pair_matches_torch(indoor, shared_data):
    torch_net, onnx_net = indoor
    src, ref, gt = _real_pair(shared_data)
    a, b = torch_net(src, ref), onnx_net(src, ref)
    assert np.abs(a.transform - b.transform).max() < TOLERANCE
    assert len(b.corr_scores) == len(a.corr_scores) > 100
    np.testing.assert_allclose(_rows(b), _rows(a), atol=1e-5)
    # and the answer is the right one (not two runtimes agreeing on a wrong one)
    assert np.abs(b.transform[:3, 3] - gt[:3, 3]).max() < 0.3


def test_hypotheses_match_torch(indoor, shared_data):
    torch_net, onnx_net = indoor
    src, ref, _ = _real_pair(shared_data)
    rots = np.stack([np.eye(3), _rotation([0, 0, 1], 90), _rotation([1, 0, 0], 180)])
    for a, b in zip(
        torch_net.hypotheses(src, ref, rots), onnx_net.hypotheses(src, ref, rots), strict=True
    ):
        assert np.abs(a.transform - b.transform).max() < TOLERANCE
        np.testing.assert_allclose(_rows(b), _rows(a), atol=1e-5)


def test_keeping_is_the_plain_pass_and_turns_the_source_on_its_own_work(indoor, shared_data):
    """``keeping``: the plain pass's prediction, and turned sources (the mirror image too)
    predicted as the hypotheses path predicts them, for the turned source."""
    from scipy.spatial import cKDTree

    from pcreg.registration.mirror import REFLECTION

    _, onnx_net = indoor
    src, ref, _ = _real_pair(shared_data)
    pred, turned = onnx_net.keeping(src, ref)
    plain = onnx_net(src, ref)
    np.testing.assert_allclose(pred.transform, plain.transform, atol=1e-9)
    np.testing.assert_allclose(_rows(pred), _rows(plain), atol=1e-9)
    rots = np.stack([_rotation([0, 0, 1], 90), REFLECTION])
    for rot, want in zip(rots, onnx_net.hypotheses(src, ref, rots), strict=True):
        got = turned(rot)
        np.testing.assert_allclose(got.transform, want.transform, atol=1e-6)
        np.testing.assert_allclose(_rows(got), _rows(want), atol=1e-6)
    # the mirror image's correspondences are points of the mirrored source (x -> -x)
    image = turned(REFLECTION)
    gap, _ = cKDTree(src * np.diag(REFLECTION)).query(image.src_corr_points)
    assert len(gap) > 100 and gap.max() < 0.05  # within the network's 5 cm voxel


def test_a_registration_runs_the_references_half_once(indoor, shared_data, monkeypatch):
    """Inside one registration (:func:`~pcreg.registration.memo.once_per_registration`) a
    second pass with the same reference, given as a new array (``auto``'s pass from FPFH +
    RANSAC's pose, the mirror check's), runs only the source's pyramid, backbone and
    embedding, and predicts bit for bit what a pass of its own predicts; outside it, and for
    another reference (which then replaces the first: one per network), both halves run."""
    from pcreg.registration.memo import once_per_registration

    _, onnx_net = indoor
    src, ref, _ = _real_pair(shared_data)
    turned = src @ _rotation([0, 0, 1], 30).T + [0.5, -0.2, 0.1]
    alone = onnx_net(turned, ref)
    backbones: list[int] = []
    real = onnx_net._backbone
    monkeypatch.setattr(onnx_net, "_backbone",
                        lambda pyr: backbones.append(len(pyr.points[0])) or real(pyr))  # fmt: skip
    with once_per_registration():
        assert not onnx_net.knows(ref)
        onnx_net.keeping(src, ref)  # the first pass: both halves
        assert len(backbones) == 2 and onnx_net.knows(ref.copy())
        again = onnx_net(turned, ref.copy())  # the same reference, a new array
        assert len(backbones) == 3  # the source's alone
        onnx_net(turned, ref[:-1])  # another reference: both halves, and it replaces the first
        assert len(backbones) == 5 and onnx_net.knows(ref[:-1]) and not onnx_net.knows(ref)
        onnx_net(turned, ref)
        assert len(backbones) == 7
    np.testing.assert_array_equal(again.transform, alone.transform)
    np.testing.assert_array_equal(_rows(again), _rows(alone))
    onnx_net(turned, ref)  # outside a registration nothing is kept
    assert len(backbones) == 9 and not onnx_net.knows(ref)


@pytest.mark.slow
def test_real_outdoor_pair_matches_torch(cache, shared_data):
    src, ref = _kitti(shared_data, 94), _kitti(shared_data, 95)
    a = load_network("outdoor").network(src, ref)
    b = load_onnx_network("outdoor").network(src, ref)
    assert np.abs(a.transform - b.transform).max() < TOLERANCE


def test_export_is_cached_checked_and_rebuilt_for_new_weights(indoor, cache, monkeypatch):
    folder, sha = rt_loading.export_folder("indoor")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["weights_sha256"] == sha and folder.name == f"indoor-{sha[:16]}"
    assert manifest["check"]["max_transform_difference"] < TOLERANCE
    # a second load reads the cache: no export (torch's exporter would be called)
    monkeypatch.setattr(rt_loading, "_export", lambda *a: pytest.fail("exported again"))
    assert load_onnx_network("indoor") is not None
    # a manifest of other weights is not used
    monkeypatch.setattr(rt_loading, "_sha256", lambda path: "0" * 64)
    calls = []

    def export(*args):
        calls.append(args)
        raise OSError("not this time")

    monkeypatch.setattr(rt_loading, "_export", export)
    assert load_onnx_network("indoor") is None  # auto: the torch path, with a warning
    assert calls and calls[0][1].name == "indoor-" + "0" * 16


def test_a_failed_export_keeps_the_torch_path(cache, monkeypatch, caplog, tmp_path):
    """Cheap: the export is replaced by a failure (the next test runs the real check)."""
    monkeypatch.setenv("PCREG_CACHE_DIR", str(tmp_path))

    def fails(*args):
        raise ValueError("the export differs from the torch network by 1.00e+00")

    monkeypatch.setattr("pcreg.registration.onnx_export.export_graphs", fails)
    assert load_onnx_network("indoor") is None
    assert "a one-time export into" in caplog.text  # the first use says why it waits
    assert "runs on torch" in caplog.text and "differs from the torch network" in caplog.text
    left = list((tmp_path / "onnx").iterdir())
    assert [p.name.endswith(".failed.json") for p in left] == [True]  # no half-written folder
    # the failure is remembered: the next process does not pay for the export again
    monkeypatch.setattr(rt_loading, "_export", lambda *a: pytest.fail("exported again"))
    caplog.clear()
    assert load_onnx_network("indoor") is None
    assert "an earlier export failed" in caplog.text and "--force" in caplog.text
    monkeypatch.setenv("PCREG_RUNTIME", "onnx")
    with pytest.raises(RuntimeError, match="PCREG_RUNTIME=onnx"):
        load_onnx_network("indoor")


def test_a_stale_export_is_replaced(monkeypatch, tmp_path):
    """An export made by another onnxruntime (or other code) is rebuilt and replaces the old
    folder; it used to fail on the non-empty folder and re-export on every run. The export's
    steps are stubbed: this is about the folder, the next tests about the graphs."""
    from pcreg.registration import onnx_export

    monkeypatch.setenv("PCREG_CACHE_DIR", str(tmp_path))
    folder, sha = rt_loading.export_folder("indoor")
    folder.mkdir(parents=True)
    stale = {**rt_loading._versions(), "onnxruntime": "0.0.1", "weights_sha256": sha,
             "graphs": {"g": "old.onnx"}}  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps(stale))
    (folder / "old.onnx").write_bytes(b"old")
    assert rt_loading._read_manifest(folder, sha) is None

    def export_graphs(model, out):
        (out / "g.onnx").write_bytes(b"new")
        return {"g": "g.onnx"}

    monkeypatch.setattr(onnx_export, "export_graphs", export_graphs)
    monkeypatch.setattr(onnx_export, "optimise_graphs", lambda out, graphs: graphs)
    monkeypatch.setattr(rt_loading, "_check", lambda *a: {"max_transform_difference": 0.0})
    monkeypatch.setattr(rt_loading, "_open", lambda model, f, manifest, threads: manifest)
    manifest = load_onnx_network("indoor")
    assert manifest is not None and manifest["onnxruntime"] != "0.0.1"
    assert sorted(p.name for p in folder.iterdir()) == ["g.onnx", "manifest.json"]
    assert rt_loading._read_manifest(folder, sha) == json.loads(json.dumps(manifest))
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # nothing set aside left


@pytest.mark.slow
def test_a_failed_check_keeps_the_torch_path(cache, monkeypatch, caplog, tmp_path):
    monkeypatch.setenv("PCREG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rt_loading, "EXPORT_TOLERANCE", -1.0)  # every export fails its check
    assert load_onnx_network("indoor") is None
    assert "runs on torch" in caplog.text and "differs from the torch network" in caplog.text
    left = [p.name for p in (tmp_path / "onnx").iterdir()]
    assert len(left) == 1 and left[0].endswith(".failed.json")  # no half-written folder
    monkeypatch.setenv("PCREG_RUNTIME", "onnx")
    with pytest.raises(RuntimeError, match="PCREG_RUNTIME=onnx"):
        load_onnx_network("indoor")


def test_runtime_choice(monkeypatch, tmp_path):
    from pcreg.errors import InputError

    monkeypatch.setenv("PCREG_RUNTIME", "torch")
    assert load_onnx_network("indoor") is None
    monkeypatch.setenv("PCREG_RUNTIME", "tpu")
    with pytest.raises(InputError, match="PCREG_RUNTIME"):
        load_onnx_network("indoor")
    monkeypatch.delenv("PCREG_RUNTIME")
    assert load_onnx_network(str(tmp_path / "custom.pt")) is None  # a checkpoint: torch


def test_loading_an_export_imports_no_torch(indoor, cache):
    """A process that registers with the cached export never imports torch."""
    code = (
        "import sys, numpy as np\n"
        "from pcreg.registration.onnx_loading import load_onnx_network\n"
        "net = load_onnx_network('indoor').network\n"
        "rng = np.random.default_rng(0)\n"
        "ref = rng.random((3000, 3)) * 3\n"
        "pred = net(ref + 0.1, ref)\n"
        "assert np.isfinite(pred.transform).all()\n"
        "print(sorted(m for m in ('torch', 'open3d') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={**__import__("os").environ, "PCREG_CACHE_DIR": str(cache)},
    )  # fmt: skip
    assert out.stdout.strip() == "[]", out.stderr


def test_tracing_forms_change_only_the_exported_model(indoor):
    """While a model is traced its group norms take the single-item form; another model's
    norms (another network served in the same process) keep the packed form, and afterwards
    the traced model is back to it too."""
    import torch

    from pcreg.models.backbones.kpconv.blocks import PackedGroupNorm
    from pcreg.registration.onnx_export import _traceable

    torch_indoor = indoor[0].model
    other = PackedGroupNorm(4, 8)
    mine = next(m for m in torch_indoor.modules() if isinstance(m, PackedGroupNorm))
    x = torch.randn(10, 8)
    lengths = torch.tensor([4, 6])  # two items: the packed form normalises each alone
    packed = other(x, lengths)
    with _traceable(torch_indoor):
        torch.testing.assert_close(other(x, lengths), packed)
        assert mine.forward.__func__.__name__ == "_single_item_group_norm"
    assert "forward" not in vars(mine) and mine.forward.__func__ is PackedGroupNorm.forward
