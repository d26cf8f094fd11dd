"""Offscreen rendering with Open3D's legacy Visualizer (EGL when there is no display; it must
not follow an ``OffscreenRenderer`` in the same process, DESIGN §5), composed with matplotlib.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from pcreg._fs import _host_tag, _pid_alive, atomic_output

__all__ = [
    "REFERENCE_COLOR",
    "SOURCE_COLOR",
    "alignment_panels",
    "correspondence_panel",
    "render_clouds",
    "save_alignment_png",
    "save_panels_png",
]

SOURCE_COLOR = (0.95, 0.55, 0.05)  # orange
REFERENCE_COLOR = (0.10, 0.45, 0.85)  # blue


def principal_view(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Axes of ``points (N, 3)`` by decreasing spread: ``(major, middle, minor)`` unit vectors.

    Looking along the minor axis shows a scan's widest face whatever its frame convention
    (3DMatch fragments are in camera coordinates, KITTI in z-up Velodyne coordinates)."""
    centered = np.asarray(points, np.float64) - np.mean(points, axis=0)
    _, vecs = np.linalg.eigh(centered.T @ centered)
    return vecs[:, 2], vecs[:, 1], vecs[:, 0]


_XDG_PREFIX = "pcreg-xdg-"


@contextlib.contextmanager
def _render_environment() -> Iterator[None]:
    """Leave ``os.environ`` as it was, and provide an ``XDG_RUNTIME_DIR`` meanwhile.

    GLFW probes for a Wayland display first and, without ``XDG_RUNTIME_DIR``, prints
    "error: XDG_RUNTIME_DIR is invalid or not set" before falling back to EGL (rendering
    works either way). The directory it gets is private and empty (nothing connects to it)
    and is removed on the way out. One left by a killed process (``pcreg-xdg-<pid>-<tag>-*``)
    is removed by the next render once that pid is gone. Whatever else changed the
    environment meanwhile (importing Open3D sets ``TCM_ENABLE``) is undone too: the caller's
    ``os.environ`` is the same before and after.
    """
    before = dict(os.environ)
    runtime = None
    try:
        if not os.environ.get("XDG_RUNTIME_DIR"):
            _remove_stale_runtime_dirs()
            runtime = tempfile.mkdtemp(prefix=f"{_XDG_PREFIX}{os.getpid()}-{_host_tag()}-")
            os.environ["XDG_RUNTIME_DIR"] = runtime
        yield
    finally:
        for key in set(os.environ) - set(before):
            del os.environ[key]
        for key, value in before.items():
            if os.environ.get(key) != value:
                os.environ[key] = value
        if runtime is not None:
            shutil.rmtree(runtime, ignore_errors=True)


def _remove_stale_runtime_dirs() -> None:
    """Remove empty ``pcreg-xdg-<pid>-<tag>-*`` directories of dead processes of this machine."""
    if os.name == "nt":
        return
    pattern = re.compile(
        re.escape(_XDG_PREFIX) + r"(?P<pid>[0-9]+)-(?P<tag>[0-9a-f]{8})-[A-Za-z0-9_]+"
    )
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(_XDG_PREFIX):
            continue
        match = pattern.fullmatch(entry.name)
        if match is None or match["tag"] != _host_tag() or _pid_alive(int(match["pid"])):
            continue
        with contextlib.suppress(OSError):  # not empty, not ours, or gone already
            os.rmdir(entry.path)


def render_clouds(
    clouds: Sequence[tuple[np.ndarray, Sequence[float]]],
    *,
    lines: tuple[np.ndarray, np.ndarray] | None = None,
    line_color: Sequence[float] | np.ndarray = (0.1, 0.7, 0.2),
    width: int = 800,
    height: int = 600,
    front: Sequence[float] | None = None,
    up: Sequence[float] | None = None,
    point_size: float = 2.0,
) -> np.ndarray:
    """Render coloured clouds (and optional segments) to an RGB image.

    Args:
        clouds: ``[(points (N, 3), rgb in [0, 1]), ...]``.
        lines: optional ``(starts (K, 3), ends (K, 3))`` drawn as segments, in
            ``line_color`` (one rgb, or ``(K, 3)`` one per segment).
        front, up: camera direction (from the scene towards the camera) and up vector;
            by default from :func:`principal_view` of all points, tilted 30 degrees.

    Returns:
        ``(height, width, 3) uint8``.
    """
    with _render_environment():
        return _render_clouds(clouds, lines, line_color, width, height, front, up, point_size)


def _render_clouds(
    clouds: Sequence[tuple[np.ndarray, Sequence[float]]],
    lines: tuple[np.ndarray, np.ndarray] | None,
    line_color: Sequence[float] | np.ndarray,
    width: int,
    height: int,
    front: Sequence[float] | None,
    up: Sequence[float] | None,
    point_size: float,
) -> np.ndarray:
    import open3d as o3d

    # Headless: GLFW finds no display and Open3D falls back to EGL; keep that quiet.
    o3d.utility.set_verbosity_level(o3d.utility.VerbosityLevel.Error)
    vis = o3d.visualization.Visualizer()
    if not vis.create_window(visible=False, width=width, height=height):
        raise RuntimeError("Open3D could not create an offscreen window (no EGL/OpenGL?)")
    try:
        for points, color in clouds:
            pcd = o3d.geometry.PointCloud(
                o3d.utility.Vector3dVector(np.asarray(points, np.float64))
            )
            pcd.paint_uniform_color(list(color))
            vis.add_geometry(pcd)
        if lines is not None and len(lines[0]):
            starts, ends = (np.asarray(x, np.float64) for x in lines)
            line_set = o3d.geometry.LineSet(
                o3d.utility.Vector3dVector(np.vstack([starts, ends])),
                o3d.utility.Vector2iVector(
                    np.stack([np.arange(len(starts)), np.arange(len(starts)) + len(starts)], 1)
                ),
            )
            colors = np.asarray(line_color, np.float64)
            if colors.ndim == 2:
                line_set.colors = o3d.utility.Vector3dVector(colors)
            else:
                line_set.paint_uniform_color(colors.tolist())
            vis.add_geometry(line_set)
        opt = vis.get_render_option()
        opt.point_size = point_size
        opt.background_color = np.array([1.0, 1.0, 1.0])
        ctrl = vis.get_view_control()
        everything = np.vstack([np.asarray(c[0]) for c in clouds])
        if front is None or up is None:
            _, middle, minor = principal_view(everything)
            front = minor * np.cos(np.radians(30)) - middle * np.sin(np.radians(30))
            up = middle
        ctrl.set_front(list(front))
        ctrl.set_up(list(up))
        ctrl.set_lookat(everything.mean(axis=0).tolist())
        ctrl.set_zoom(0.55)
        vis.poll_events()
        vis.update_renderer()
        image = np.asarray(vis.capture_screen_float_buffer(do_render=True))
    finally:
        vis.destroy_window()
    return (np.clip(image, 0, 1) * 255).astype(np.uint8)


INLIER_COLOR = (0.10, 0.70, 0.20)  # green
OUTLIER_COLOR = (0.85, 0.10, 0.10)  # red


def correspondence_panel(
    src_points: np.ndarray,
    ref_points: np.ndarray,
    transform: np.ndarray,
    correspondences: tuple[np.ndarray, np.ndarray],
    *,
    gt: np.ndarray | None = None,
    radius: float = 0.1,
    max_lines: int = 250,
) -> tuple[str, np.ndarray]:
    """``(caption, image)``: the reference, the source moved by ``transform`` and lifted beside
    it along the reference's major axis, and the correspondences (source / reference
    coordinates) as segments; with ``gt`` the ones within ``radius`` metres under the truth are
    green and the others red (at most ``max_lines``, evenly subsampled)."""
    src = np.asarray(src_points, np.float64)
    ref = np.asarray(ref_points, np.float64)
    moved = src @ transform[:3, :3].T + transform[:3, 3]
    major, _, _ = principal_view(ref)
    offset = 1.15 * float(np.ptp(ref @ major)) * major
    src_c, ref_c = (np.asarray(c, np.float64).reshape(-1, 3) for c in correspondences)
    total = len(src_c)
    keep = np.linspace(0, total - 1, min(max_lines, total)).astype(int) if total else []
    src_c, ref_c = src_c[keep], ref_c[keep]
    moved_c = src_c @ transform[:3, :3].T + transform[:3, 3]
    colors: Sequence[float] | np.ndarray = INLIER_COLOR
    caption = f"{len(keep)} of {total} correspondences (source shifted aside)"
    if gt is not None and total:
        true_c = src_c @ gt[:3, :3].T + gt[:3, 3]
        good = np.linalg.norm(true_c - ref_c, axis=1) < radius
        colors = np.where(good[:, None], INLIER_COLOR, OUTLIER_COLOR)
        caption = (
            f"{len(keep)} of {total} correspondences: {good.mean():.0%} within "
            f"{100 * radius:.0f} cm under the truth (green)"
        )
    image = render_clouds(
        [(moved + offset, SOURCE_COLOR), (ref, REFERENCE_COLOR)],
        lines=(moved_c + offset, ref_c),
        line_color=colors,
    )
    return caption, image


def save_panels_png(
    path: str | os.PathLike[str],
    panels: Sequence[tuple[str, np.ndarray]],
    *,
    title: str = "",
    overwrite: bool = False,
) -> Path:
    """Images side by side with captions, written atomically as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5.0))
    for ax, (name, image) in zip(np.atleast_1d(axes), panels, strict=True):
        ax.imshow(image)
        ax.set_title(name, fontsize=10)
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    with atomic_output(path, overwrite=overwrite) as tmp:
        fig.savefig(tmp, dpi=90, format="png")
    plt.close(fig)
    return path


def alignment_panels(
    src_points: np.ndarray, ref_points: np.ndarray, transform: np.ndarray
) -> list[tuple[str, np.ndarray]]:
    """Before (as given) and after (source moved by ``transform``) renders, source orange and
    reference blue."""
    src = np.asarray(src_points, np.float64)
    ref = np.asarray(ref_points, np.float64)
    moved = src @ transform[:3, :3].T + transform[:3, 3]
    return [
        ("before (input poses)", render_clouds([(src, SOURCE_COLOR), (ref, REFERENCE_COLOR)])),
        (
            "after (source moved by T_ref_src)",
            render_clouds([(moved, SOURCE_COLOR), (ref, REFERENCE_COLOR)]),
        ),
    ]


def save_alignment_png(
    path: str | os.PathLike[str],
    src_points: np.ndarray,
    ref_points: np.ndarray,
    transform: np.ndarray,
    *,
    title: str = "",
    correspondences: tuple[np.ndarray, np.ndarray] | None = None,
    gt: np.ndarray | None = None,
    radius: float = 0.1,
    overwrite: bool = False,
    max_lines: int = 250,
) -> Path:
    """Write a before/after PNG: source (orange) and reference (blue) as given, then with the
    source moved by ``transform`` (``T_ref_src``). With ``correspondences`` (source and
    reference coordinates) a third panel draws them (:func:`correspondence_panel`)."""
    panels = alignment_panels(src_points, ref_points, transform)
    if correspondences is not None:
        panels.append(
            correspondence_panel(
                src_points,
                ref_points,
                transform,
                correspondences,
                gt=gt,
                radius=radius,
                max_lines=max_lines,
            )
        )
    return save_panels_png(path, panels, title=title, overwrite=overwrite)
