"""The interactive Open3D window (``--show``, ``pcreg view``)."""

from __future__ import annotations

import os

import numpy as np

from pcreg.errors import InputError
from pcreg.viz.style import REFERENCE_COLOR, SOURCE_COLOR

__all__ = ["check_display", "show_pair"]


def check_display(source: str = "display", instead: str = "--render PNG") -> None:
    """Refuse before any work when there is no display to open a window on (Linux and other
    POSIX systems: neither ``DISPLAY`` nor ``WAYLAND_DISPLAY`` is set).

    Args:
        source: what asked for the window, first in the message (e.g. ``"--show"``).
        instead: what to use instead, named in the message.

    Raises:
        InputError: ``"<source>: no display to open a window on (...); use <instead>"``.
    """
    if os.name != "nt" and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise InputError(
            source,
            f"no display to open a window on (DISPLAY and WAYLAND_DISPLAY are unset); "
            f"use {instead} instead",
        )


def show_pair(src: np.ndarray, ref: np.ndarray, transform: np.ndarray) -> None:
    """Open a window with the source (orange, moved by ``transform``) and reference (blue).

    Raises:
        InputError: there is no display to open a window on (:func:`check_display`).
    """
    check_display()
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
