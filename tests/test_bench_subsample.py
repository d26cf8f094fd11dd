"""Grid-subsampling benchmark rows and table, and `pcreg benchmark --quick` end to end."""

from __future__ import annotations

import numpy as np

from pcreg.bench.subsample import benchmark_subsampling, format_subsample_table


def _cloud(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 4, (n, 3)).astype(np.float32)


def test_both_methods_timed_with_kept_counts():
    cloud = _cloud()
    rows = benchmark_subsampling(cloud, sizes=(2000,), voxels=(0.5,), runs=1)
    assert [(r.method, r.points, r.voxel_m) for r in rows] == [
        ("pcreg", 2000, 0.5),
        ("open3d", 2000, 0.5),
    ]
    assert all(r.median_s > 0 for r in rows)
    # 2000 uniform points in a 4 m cube at 0.5 m: at most 9^3 cells, nearly all occupied
    ours, theirs = rows[0].kept, rows[1].kept
    assert 400 < ours <= 729 and 400 < theirs <= 729
    table = format_subsample_table(rows, source="test cloud", command="pcreg benchmark --quick")
    line = next(x for x in table.splitlines() if x.startswith("| 2,000 | 0.5 |"))
    ratio = rows[0].median_s / rows[1].median_s
    assert f"| {ours:,}, {theirs:,} |" in line and line.endswith(f"| {ratio:.2f}x |")


def test_quick_benchmark_writes_neighbor_and_subsampling_sections(tmp_path, monkeypatch):
    from pcreg import cli

    calls = {}

    def fake_neighbors(cloud, **kw):
        calls["neighbors"] = len(cloud)
        from pcreg.bench.neighbors import NeighborTiming

        return [NeighborTiming(len(cloud), "knn16", "open3d", 0.01, 1)]

    real_subsampling = benchmark_subsampling
    monkeypatch.setattr("pcreg.bench.neighbors.benchmark_neighbors", fake_neighbors)
    monkeypatch.setattr(
        "pcreg.bench.subsample.benchmark_subsampling",
        lambda cloud, runs: real_subsampling(cloud[:3000], sizes=(3000,), voxels=(0.3,), runs=1),
    )
    out = tmp_path / "BENCH.md"
    out.write_text("# Benchmarks\n\nkept text\n")
    code = cli.main(
        ["benchmark", "--quick", "--runs", "1", "--output", str(out),
         "--shared-data", str(tmp_path / "absent")]
    )  # fmt: skip
    text = out.read_text()
    assert code == 0 and calls["neighbors"] > 100_000  # the synthetic street stands in
    assert "kept text" in text and "## Neighbor search (CPU)" in text
    assert "## Grid subsampling (CPU)" in text and "| 3,000 | 0.3 |" in text
