"""What ``pcreg odometry`` writes, and the calibration its camera frame needs: KITTI poses
files (12 numbers a line, read by ``evo`` and KITTI's devkit) with their sidecar JSON (the
frame, the calibration, the scans; :func:`pcreg.odometry.pose_record` makes the record), the
top-down trajectory picture, and KITTI's ``calib.txt`` beside the scans. The frames and the
segments these files describe: :mod:`pcreg.odometry`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from pcreg._fs import atomic_output
from pcreg.errors import InputError

__all__ = [
    "CONVENTION",
    "CONVENTION_LOOP",
    "FRAMES",
    "find_calib",
    "resolve_calib",
    "save_trajectory_png",
    "sidecar_path",
    "trajectory_figure",
    "write_kitti_poses",
]

logger = logging.getLogger(__name__)

FRAMES = ("lidar", "camera")
CONVENTION = (
    "T_first_k: maps points of scan k into the frame of the first scan of its segment "
    "(segments[k]; a single segment 0, the first scan's frame, unless the chain broke)"
)
CONVENTION_LOOP = (
    "T_first_k: maps points of scan k into the frame of the first scan of its segment "
    "(segments[k]): segment 0 holds the scans the pose graph connects to the first scan, a scan "
    "it cannot place starts the next segment with the scans the graph connects to it"
)


def find_calib(scans: Sequence[str | os.PathLike[str]]) -> Path | None:
    """KITTI's ``calib.txt`` beside the scans' directory (``sequences/XX/calib.txt`` for
    scans in ``sequences/XX/velodyne/``), or None: the scans are in more than one directory,
    or there is no such file."""
    folders = {Path(os.fspath(s)).parent for s in scans}
    if len(folders) != 1:
        return None
    calib = folders.pop().parent / "calib.txt"
    return calib if calib.is_file() else None


def resolve_calib(
    frame: str,
    calib: str | os.PathLike[str] | None,
    scans: Sequence[str | os.PathLike[str]],
) -> Path | None:
    """The calibration file the poses of ``frame`` need: None for ``"lidar"``; for
    ``"camera"`` ``calib`` when given, else :func:`find_calib`'s.

    Raises:
        InputError: an unknown frame, a ``calib`` with the LiDAR frame (it would not be
            used), or the camera frame with no calibration given or found.
    """
    if frame not in FRAMES:
        raise InputError("frame", f"expected one of {', '.join(FRAMES)}, got {frame!r}")
    if frame == "lidar":
        if calib is not None:
            raise InputError(
                "--calib", "is only used with --frame camera (the LiDAR frame needs none)"
            )
        return None
    if calib is not None:
        return Path(os.fspath(calib))
    found = find_calib(scans)
    if found is None:
        raise InputError(
            "--calib",
            "--frame camera needs the sequence's KITTI calib.txt (its Tr: line, Velodyne -> "
            "cam0) and none was given or found beside the scans' directory",
        )
    logger.info("camera frame: calibration %s (beside the scans' directory)", found)
    return found


def sidecar_path(path: str | os.PathLike[str]) -> Path:
    """The sidecar JSON of a poses file: its name with ``.json`` appended (``05.txt`` ->
    ``05.txt.json``), so that it never is the poses file itself, whatever its suffix."""
    path = Path(path)
    return path.with_name(path.name + ".json")


def write_kitti_poses(
    path: str | os.PathLike[str],
    poses: np.ndarray,
    *,
    overwrite: bool = False,
    record: Mapping[str, object] | None = None,
) -> Path:
    """Write ``poses (K, 4, 4)`` as KITTI text: one line of 12 numbers (3x4 row-major) each.

    With ``record`` (:func:`pose_record`), also write it as the sidecar
    :func:`sidecar_path`. Both files are written atomically, and neither replaces anything
    until both are complete; ``overwrite`` applies to both.

    Raises:
        OutputExistsError: a file exists (either) and ``overwrite`` is False.
        UnwritableOutputError: a path that cannot be written.
    """
    rows = np.asarray(poses, np.float64)[:, :3, :4].reshape(len(poses), 12)
    with atomic_output(path, overwrite=overwrite) as tmp:
        np.savetxt(tmp, rows, fmt="%.9e")
        if record is not None:
            with atomic_output(sidecar_path(path), overwrite=overwrite) as side:
                side.write_text(json.dumps(record, indent=1) + "\n")
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
    from pcreg.viz.figures import save_figure

    fig = trajectory_figure(poses, scans, map_voxel=map_voxel, title=title)
    return save_figure(fig, path, dpi=100, overwrite=overwrite)
