"""The interactive Open3D window (``--show``, ``pcreg view``)."""

from __future__ import annotations

import os

import numpy as np

from pcreg.errors import InputError
from pcreg.viz.style import REFERENCE_COLOR, SOURCE_COLOR

__all__ = ["show_pair"]


def show_pair(src: np.ndarray, ref: np.ndarray, transform: np.ndarray) -> None:
    """Open a window with the source (orange, moved by ``transform``) and reference (blue).

    Raises:
        InputError: there is no display to open a window on (use ``--render PNG`` instead).
    """
    if os.name != "nt" and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise InputError("--show", "no display to open a window on (use --render PNG instead)")
    import open3d as o3d

    def cloud(points, color):
        pc = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, np.float64)))
        pc.paint_uniform_color(color)
        return pc

    moved = np.asarray(src, np.float64) @ transform[:3, :3].T + transform[:3, 3]
    o3d.visualization.draw_geometries(
        [cloud(moved, SOURCE_COLOR), cloud(ref, REFERENCE_COLOR)],
        window_name="pcreg: source (orange) on reference (blue)",
    )
