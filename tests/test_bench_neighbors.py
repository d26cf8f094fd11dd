"""The neighbor-search benchmark: what `pcreg benchmark --quick` times on a CPU-only machine."""

from __future__ import annotations

import numpy as np


def test_quick_benchmark_never_tries_keops_on_a_cpu_only_machine(tmp_path, monkeypatch):
    """KeOps installed, no CUDA: --quick times no KeOps kernel (on a CPU it compiles and brute
    forces for minutes, after a "CUDA libraries not found" warning), and no brute force above
    its size cap. The searches are replaced by recorders; cKDTree and subsampling run for
    real on a small cloud."""
    from pcreg import cli
    from pcreg.commands.benchmark import QUICK_BRUTE_FORCE_MAX

    tried: list[tuple[str, int]] = []

    def record(query, support, *args, backend="auto", **kwargs):
        tried.append((backend, len(query)))

    rng = np.random.default_rng(0)
    cloud = rng.uniform(-40, 40, (QUICK_BRUTE_FORCE_MAX + 1000, 3)).astype(np.float32)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr(
        "pcreg.bench.neighbors.available_backends",
        lambda: ["reference", "torch", "open3d", "keops"],
    )
    monkeypatch.setattr("pcreg.bench.neighbors.knn", record)
    monkeypatch.setattr("pcreg.bench.neighbors.radius_search", record)
    monkeypatch.setattr(
        "pcreg.bench.neighbors.load_benchmark_cloud", lambda shared: (cloud, "test cloud")
    )
    from pcreg.bench.subsample import benchmark_subsampling

    monkeypatch.setattr(
        "pcreg.bench.subsample.benchmark_subsampling",
        lambda c, runs: benchmark_subsampling(c[:2000], sizes=(2000,), voxels=(0.5,), runs=1),
    )
    out = tmp_path / "BENCH.md"
    argv = ["benchmark", "--quick", "--runs", "1", "--output", str(out),
            "--shared-data", str(tmp_path / "absent")]  # fmt: skip
    assert cli.main(argv) == 0
    backends = {b for b, _ in tried}
    assert "keops" not in backends and backends == {"torch", "open3d"}
    # brute force (torch) only at the quick size cap; open3d at the larger size too
    assert max(n for b, n in tried if b == "torch") <= QUICK_BRUTE_FORCE_MAX
    assert max(n for b, n in tried if b == "open3d") > QUICK_BRUTE_FORCE_MAX
    table = out.read_text()
    assert "| keops |" not in table and "not timed on CPU" in table
