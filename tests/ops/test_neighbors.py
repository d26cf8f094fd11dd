"""Every neighbor backend against the exact reference, over a grid of cases (PyTorch3D style)."""

from __future__ import annotations

import itertools
import json

import pytest
import torch

from pcreg.ops.neighbors import available_backends, knn, radius_search, resolve_backend

FAST_BACKENDS = [b for b in ("torch", "open3d") if b in available_backends()]
HAS_KEOPS = "keops" in available_backends()


def make_case(gen, q_lengths, s_lengths, offset=0.0, dtype=torch.float32):
    q_len = torch.tensor(q_lengths)
    s_len = torch.tensor(s_lengths)
    # Clustered points (like scan surfaces) plus uniform ones, in a 2 m box.
    query = torch.rand(int(q_len.sum()), 3, generator=gen, dtype=torch.float64) * 2.0
    support = torch.rand(int(s_len.sum()), 3, generator=gen, dtype=torch.float64) * 2.0
    support[::3, 2] = 0.5  # a plane: many equal-ish z, realistic for floors
    shift = torch.tensor([offset, -offset, offset], dtype=torch.float64)
    return (query + shift).to(dtype), (support + shift).to(dtype), q_len, s_len


def assert_same_neighbors(result, expected, support_len):
    """Same neighbor set in every row and distances within 1e-5 relative. The random inputs
    have no exact distance ties, so the sets must match exactly."""
    assert result.indices.dtype == torch.long
    assert result.indices.shape == expected.indices.shape
    assert result.distances.dtype == expected.distances.dtype
    torch.testing.assert_close(result.distances, expected.distances, rtol=1e-5, atol=1e-7)
    shadow = expected.indices == support_len
    assert torch.equal(result.indices == support_len, shadow)
    assert torch.isinf(result.distances[shadow]).all()
    got = torch.sort(result.indices, dim=1).values
    want = torch.sort(expected.indices, dim=1).values
    mismatch = (got != want).any(dim=1)
    assert int(mismatch.sum()) == 0, f"{int(mismatch.sum())} rows with different neighbor sets"


LENGTH_CASES = [
    ([1], [1]),
    ([50], [7]),  # fewer support points than k
    ([300], [400]),
    ([120, 0, 80], [90, 60, 0]),  # ragged, an empty query item and an empty support item
    ([64, 200], [256, 33]),
]


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize(
    ("lengths", "k", "offset"), list(itertools.product(LENGTH_CASES, [1, 8, 16], [0.0, 100.0]))
)
def test_knn_matches_reference(backend, lengths, k, offset, gen):
    q, s, ql, sl = make_case(gen, *lengths, offset=offset)
    ref = knn(q, s, k, query_lengths=ql, support_lengths=sl, backend="reference")
    out = knn(q, s, k, query_lengths=ql, support_lengths=sl, backend=backend)
    assert_same_neighbors(out, ref, s.shape[0])


@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize(
    ("lengths", "radius", "cap", "offset"),
    list(itertools.product(LENGTH_CASES, [0.05, 0.3], [None, 4, 32], [0.0, 100.0])),
)
def test_radius_matches_reference(backend, lengths, radius, cap, offset, gen):
    q, s, ql, sl = make_case(gen, *lengths, offset=offset)
    ref = radius_search(
        q, s, radius, max_neighbors=cap, query_lengths=ql, support_lengths=sl, backend="reference"
    )
    out = radius_search(
        q, s, radius, max_neighbors=cap, query_lengths=ql, support_lengths=sl, backend=backend
    )
    assert_same_neighbors(out, ref, s.shape[0])
    valid = out.indices < s.shape[0]
    assert (out.distances[valid] <= radius).all()


@pytest.mark.keops
@pytest.mark.skipif(not HAS_KEOPS, reason="pykeops not installed")
@pytest.mark.parametrize(
    ("lengths", "offset"),
    [
        (([120, 0, 80], [90, 60, 0]), 0.0),
        (([300], [400]), 100.0),
        (([50], [7]), 0.0),
    ],
)
def test_keops_on_cpu_matches_reference(lengths, offset, gen):
    # Few distinct k/caps on purpose: KeOps compiles one kernel per reduction and k (~10 s).
    q, s, ql, sl = make_case(gen, *lengths, offset=offset)
    for k in (8,):
        ref = knn(q, s, k, query_lengths=ql, support_lengths=sl, backend="reference")
        out = knn(q, s, k, query_lengths=ql, support_lengths=sl, backend="keops")
        assert_same_neighbors(out, ref, s.shape[0])
    ref = radius_search(
        q, s, 0.3, max_neighbors=8, query_lengths=ql, support_lengths=sl, backend="reference"
    )
    out = radius_search(
        q, s, 0.3, max_neighbors=8, query_lengths=ql, support_lengths=sl, backend="keops"
    )
    assert_same_neighbors(out, ref, s.shape[0])


def test_truncation_keeps_the_nearest():
    support = torch.tensor([[float(i), 0.0, 0.0] for i in range(10)])
    query = torch.tensor([[4.1, 0.0, 0.0]])
    for backend in ["reference", *FAST_BACKENDS]:
        res = radius_search(query, support, 3.0, max_neighbors=3, backend=backend)
        assert res.indices.tolist() == [[4, 5, 3]], backend
        torch.testing.assert_close(res.distances, torch.tensor([[0.1, 0.9, 1.1]]))


@pytest.mark.parametrize("cap", [None, 4])
def test_radius_is_inclusive(cap):
    """A support point exactly at the radius is a neighbor for every backend (Open3D's own
    radius tests are strict: the backend must widen its search)."""
    support = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 2.0]])
    query = torch.zeros(1, 3)
    for backend in ["reference", *FAST_BACKENDS]:
        res = radius_search(query, support, 1.0, max_neighbors=cap, backend=backend)
        assert res.indices[0, :2].tolist() == [1, 0], backend
        assert (res.indices[0, 2:] == 3).all(), backend  # the point at 2 m is not
        torch.testing.assert_close(res.distances[0, :2], torch.tensor([0.5, 1.0]))


@pytest.mark.skipif("open3d" not in FAST_BACKENDS, reason="open3d not installed")
@pytest.mark.parametrize("dense", [False, True])
def test_open3d_capped_radius_both_strategies_match_reference(gen, monkeypatch, dense):
    """The Open3D backend picks a plain kNN where the radius holds many times the cap (raw
    dense scans) and the radius-bounded search elsewhere; both give the reference's answer."""
    from pcreg.ops.neighbors import _open3d

    monkeypatch.setattr(_open3d, "DENSITY_CHECK_QUERIES", 0)  # check even small searches
    points = torch.rand(600, 3, generator=gen) * torch.tensor([2.0, 2.0, 0.05])  # a thin slab
    radius, cap = (0.4, 8) if dense else (0.08, 16)
    o3d = _open3d._o3d()
    nns = o3d.core.nns.NearestNeighborSearch(_open3d._tensor(points))
    nns.knn_index()
    assert _open3d._dense(nns, points, radius, cap) is dense
    ref = radius_search(points, points, radius, max_neighbors=cap, backend="reference")
    out = radius_search(points, points, radius, max_neighbors=cap, backend="open3d")
    assert_same_neighbors(out, ref, points.shape[0])


def test_empty_neighborhoods_are_shadow_padded():
    support = torch.zeros(5, 3)
    query = torch.full((2, 3), 10.0)
    for backend in ["reference", *FAST_BACKENDS]:
        res = radius_search(query, support, 1.0, max_neighbors=4, backend=backend)
        assert (res.indices == 5).all(), backend
        assert torch.isinf(res.distances).all()
        res = radius_search(query, support, 1.0, backend=backend)
        assert res.indices.shape == (2, 0)


def test_items_never_mix():
    # Item 1's support is right on top of item 0's queries; item 0's support is far away.
    query = torch.zeros(4, 3)
    support = torch.cat([torch.full((3, 3), 50.0), torch.zeros(3, 3)])
    ql, sl = torch.tensor([2, 2]), torch.tensor([3, 3])
    for backend in ["reference", *FAST_BACKENDS]:
        res = knn(query, support, 2, query_lengths=ql, support_lengths=sl, backend=backend)
        assert (res.indices[:2] < 3).all() and (res.indices[2:] >= 3).all(), backend


def test_float64_inputs_keep_dtype(gen):
    q, s, ql, sl = make_case(gen, [40], [60], dtype=torch.float64)
    for backend in FAST_BACKENDS:
        res = knn(q, s, 4, query_lengths=ql, support_lengths=sl, backend=backend)
        assert res.distances.dtype == torch.float64


def test_bad_inputs_raise():
    pts = torch.rand(10, 3)
    with pytest.raises(ValueError, match=r"\(N, 3\)"):
        knn(torch.rand(10, 2), pts, 3)
    with pytest.raises(ValueError, match="sum\\(query_lengths\\)"):
        knn(pts, pts, 3, query_lengths=torch.tensor([4]), support_lengths=torch.tensor([10]))
    with pytest.raises(ValueError, match="k must be"):
        knn(pts, pts, 0)
    with pytest.raises(ValueError, match="radius must be"):
        radius_search(pts, pts, 0.0)
    with pytest.raises(ValueError, match="unknown neighbor backend"):
        knn(pts, pts, 3, backend="faiss")


def test_auto_rule():
    expected_cpu = "open3d" if "open3d" in available_backends() else "torch"
    assert resolve_backend("auto", "cpu") == expected_cpu
    if not torch.cuda.is_available():  # KeOps only where it runs on the GPU (checked below)
        assert resolve_backend("auto", "cuda") == "torch"


@pytest.mark.skipif(not HAS_KEOPS, reason="pykeops not installed")
def test_keops_is_picked_on_cuda_only_where_its_check_passes(monkeypatch, tmp_path, caplog):
    """A broken KeOps / CUDA pairing kills the process (a segmentation fault, not an error),
    so ``auto`` runs a check in a child process once and remembers the verdict on disk: a
    check that crashes or fails means the torch backend, with one warning saying why."""
    import logging

    from pcreg.ops.neighbors import _keops

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    crash = "import ctypes; ctypes.string_at(0)"  # what a broken KeOps does to its process
    cases = [("crash", crash, False, "crashed (SIGSEGV)"),
             ("fail", "raise SystemExit('no nvrtc here')", False, "failed: no nvrtc here"),
             ("pass", "import sys; sys.exit(0)", True, "")]  # fmt: skip
    for name, probe, runs, why in cases:
        monkeypatch.setattr(_keops, "_probe_key", lambda name=name: f"test GPU {name}")
        monkeypatch.setattr(_keops, "PROBE", probe)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="pcreg.ops.neighbors"):
            assert resolve_backend("auto", "cuda") == ("keops" if runs else "torch"), name
            assert resolve_backend("auto", "cuda") == ("keops" if runs else "torch"), name
        warnings = [r.getMessage() for r in caplog.records if "KeOps does not run" in r.message]
        assert len(warnings) == (0 if runs else 1) and all(why in w for w in warnings), warnings
        assert _keops.cuda_verdict() == (runs, f"its check {why}" if why else "")
    # remembered on disk: a new process (the in-process memo cleared) runs no check
    monkeypatch.setattr(_keops, "_VERDICTS", {})
    monkeypatch.setattr(_keops, "PROBE", "raise SystemExit('must not run')")
    monkeypatch.setattr(_keops, "_probe_key", lambda: "test GPU crash")
    assert _keops.cuda_verdict() == (False, "its check crashed (SIGSEGV)")
    saved = json.loads((tmp_path / "pcreg" / "keops-cuda-probe.json").read_text())
    assert saved["test GPU pass"] == {"ok": True, "why": ""}
    # an explicit choice is not second-guessed
    assert resolve_backend("keops", "cuda") == "keops"
