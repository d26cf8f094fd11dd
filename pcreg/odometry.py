"""LiDAR odometry by chaining pairwise registrations: scan k is registered onto scan k-1 and
the relative motions are composed, ``P_k = P_{k-1} @ T_{k-1 <- k}`` with ``P_0 = I``, so every
pose maps points of scan k into the frame of the first scan (KITTI's convention for its
``poses/XX.txt``, here in the sensor's own frame)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pcreg._fs import atomic_output
from pcreg.errors import InputError, MissingFileError

__all__ = [
    "OdometryResult",
    "run_odometry",
    "save_trajectory_png",
    "scan_list",
    "trajectory_figure",
    "write_kitti_poses",
]


@dataclass
class OdometryResult:
    """``poses (K, 4, 4) float64`` (scan k -> scan 0), ``relative (K-1, 4, 4)``
    (``T_{k-1 <- k}``), seconds per registration ``times (K-1,)``, and the model used."""

    poses: np.ndarray
    relative: np.ndarray
    times: np.ndarray
    model: str


POINT_SUFFIXES = (".bin", ".ply", ".pcd", ".npy", ".npz", ".xyz", ".txt", ".csv", ".las", ".laz")


def scan_list(items: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Scans in time order from paths, a directory (its point files, sorted by name: KITTI's
    ``000000.bin ...``) or glob patterns (each expanded and sorted).

    Raises:
        InputError: a directory or pattern that names no scan."""
    import glob

    out: list[Path] = []
    for item in items:
        text = os.fspath(item)
        if Path(text).is_dir():
            found = sorted(p for p in Path(text).iterdir() if p.suffix.lower() in POINT_SUFFIXES)
            if not found:
                raise InputError(text, "no point-cloud files in this directory")
            out += found
        elif any(c in text for c in "*?["):
            found = sorted(Path(p) for p in glob.glob(text))
            if not found:
                raise InputError(text, "the pattern matches no file")
            out += found
        else:
            out.append(Path(text))
    return out


def run_odometry(
    scans: Sequence[str | os.PathLike[str]],
    *,
    model: str | None = "outdoor",
    method: str = "geotransformer",
    icp: bool = True,
    voxel_size: float | None = None,
    device: str = "cpu",
    progress: bool = True,
    workers: int | None = None,
    address: str | None = None,
    max_memory: int | str | None = None,
    nan_policy: str = "error",
) -> OdometryResult:
    """Register each scan onto its predecessor and chain the motions (see module docstring).

    The consecutive pairs are independent, so they run in parallel on Ray
    (:class:`~pcreg.batch.runner.RayRunner`: a local cluster of ``workers`` CPUs, default all
    cores, or the cluster at ``address`` / ``RAY_ADDRESS``), and the motions are chained in
    order afterwards. ``workers=1`` (or a single pair, without ``address``) registers them
    one by one in this process instead, without starting Ray.

    Raises:
        InputError: fewer than two scans, or any scan that :func:`pcreg.api.register` rejects.
        NotRegisteredError: a consecutive pair that did not register (the chain would be
            wrong from there on).
    """
    if len(scans) < 2:
        raise InputError("scans", f"odometry needs at least two scans, got {len(scans)}")
    names = [os.fspath(s) for s in scans]
    for name in names:  # before any registration runs
        if not Path(name).is_file():
            raise MissingFileError(name, "scan not found")
    if workers is not None and workers < 1:
        raise InputError("workers", f"must be at least 1, got {workers}")
    if address is None and (workers == 1 or len(names) == 2 or device != "cpu"):
        relative, times, used = _serial(
            names, model, method, icp, voxel_size, device, progress, max_memory, nan_policy
        )
    else:
        if device != "cpu":
            raise InputError("device", "parallel odometry runs on the CPU (--device cpu)")
        from pcreg.io import read_points

        for name in names:  # a bad scan is reported before the cluster starts
            read_points(name, nan_policy=nan_policy)
        relative, times, used = _on_ray(
            names, model, method, icp, voxel_size, workers, address, progress, max_memory,
            nan_policy,
        )  # fmt: skip
    poses = [np.eye(4)]
    for t in relative:
        poses.append(poses[-1] @ t)
    return OdometryResult(np.stack(poses), np.stack(relative), np.asarray(times), used or "auto")


def _serial(names, model, method, icp, voxel_size, device, progress, max_memory, nan_policy):
    from pcreg.api import pipeline
    from pcreg.errors import NotRegisteredError
    from pcreg.io import read_points

    register = pipeline(
        model,
        method=method,
        icp=icp,
        voxel_size=voxel_size,
        device=device,
        max_memory=max_memory,
    )
    relative, times, used = [], [], model
    previous = read_points(names[0], nan_policy=nan_policy)
    for k in tqdm(range(1, len(names)), desc="odometry", unit="scan", disable=not progress):
        current = read_points(names[k], nan_policy=nan_policy)
        result = register(current, previous, (names[k], names[k - 1]))
        if not result.registered:
            raise NotRegisteredError(f"{names[k]} -> {names[k - 1]}", result.reason)
        used = result.model
        relative.append(result.transform)
        times.append(result.time_s)
        previous = current
    return relative, times, used


def _on_ray(
    names, model, method, icp, voxel_size, workers, address, progress, max_memory, nan_policy
):
    import ray

    from pcreg.batch.manifest import ManifestPair
    from pcreg.batch.runner import BatchOptions, RayRunner
    from pcreg.engine.heap import retaining
    from pcreg.errors import NotRegisteredError

    pairs = [ManifestPair(str(k), names[k], names[k - 1]) for k in range(1, len(names))]
    options = BatchOptions(
        model, method, icp, voxel_size, retain_heap=retaining(), max_memory=max_memory,
        nan_policy=nan_policy,
    )  # fmt: skip
    rows: dict[str, dict] = {}
    with RayRunner(options, address=address, workers=workers) as runner:
        pending = runner.submit(pairs)
        with tqdm(total=len(pairs), desc="odometry", unit="pair", disable=not progress) as bar:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    pair = pending.pop(ref)
                    rows[pair.id] = ray.get(ref)
                    bar.update(1)
    ordered = [rows[p.id] for p in pairs]
    for pair, row in zip(pairs, ordered, strict=True):
        if row["status"] != "ok":  # its error reads "<file>: <problem>" already
            source, _, problem = row["error"].partition(": ")
            raise InputError(source, problem or row["error"])
        if not row["registered"]:
            raise NotRegisteredError(f"{pair.src} -> {pair.ref}", row["reason"])
    relative = [np.asarray(r["transform"], np.float64) for r in ordered]
    return relative, [r["time_s"] for r in ordered], ordered[-1]["model"]


def write_kitti_poses(
    path: str | os.PathLike[str], poses: np.ndarray, *, overwrite: bool = False
) -> Path:
    """Write ``poses (K, 4, 4)`` as KITTI text: one line of 12 numbers (3x4 row-major) each."""
    rows = np.asarray(poses, np.float64)[:, :3, :4].reshape(len(poses), 12)
    with atomic_output(path, overwrite=overwrite) as tmp:
        np.savetxt(tmp, rows, fmt="%.9e")
    return Path(path)


def trajectory_figure(
    poses: np.ndarray, scans: Sequence[np.ndarray], *, map_voxel: float = 0.3, title: str = ""
):
    """The matplotlib figure of :func:`save_trajectory_png`: ``poses (K, 4, 4)`` and the
    ``K`` scans ``(N_k, 3)`` (metres, sensor frame)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    merged = np.concatenate(
        [
            np.asarray(s, np.float64) @ p[:3, :3].T + p[:3, 3]
            for s, p in zip(scans, poses, strict=True)
        ]
    )
    keys = np.floor(merged / map_voxel).astype(np.int64)
    _, first = np.unique(keys, axis=0, return_index=True)
    merged = merged[first]
    z_lo, z_hi = np.percentile(merged[:, 2], [2, 98])
    fig, ax = plt.subplots(figsize=(8.8, 8))
    dots = ax.scatter(
        merged[:, 0], merged[:, 1], c=merged[:, 2], s=0.3, cmap="viridis", vmin=z_lo, vmax=z_hi
    )
    fig.colorbar(dots, ax=ax, shrink=0.7, label="map height z (m; 2nd-98th percentile)")
    xy = poses[:, :2, 3]
    ax.plot(xy[:, 0], xy[:, 1], "-", color="red", lw=2, label=f"trajectory ({len(poses)} scans)")
    ax.plot(xy[:, 0], xy[:, 1], "o", color="red", ms=3)
    ax.plot(*xy[0], "^", color="white", mec="black", ms=11, label="start")
    ax.plot(*xy[-1], "s", color="black", mec="white", ms=9, label="end")
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.legend(loc="upper right")
    ax.set_title(title or f"merged map ({len(merged)} points at {map_voxel:g} m) and trajectory")
    fig.tight_layout()
    return fig


def save_trajectory_png(
    path: str | os.PathLike[str],
    poses: np.ndarray,
    scans: Sequence[np.ndarray],
    *,
    map_voxel: float = 0.3,
    title: str = "",
    overwrite: bool = False,
) -> Path:
    """Top-down (x-y) picture: the merged map (every scan moved by its pose, ``map_voxel``
    downsampled, coloured by height, with its colour bar) and the trajectory (a red line
    through one dot per scan, the start a white triangle and the end a black square)."""
    import matplotlib.pyplot as plt

    fig = trajectory_figure(poses, scans, map_voxel=map_voxel, title=title)
    with atomic_output(path, overwrite=overwrite) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return Path(path)
