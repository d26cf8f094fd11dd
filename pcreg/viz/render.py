"""Offscreen rendering with Open3D's legacy Visualizer (EGL when there is no display; it must
not follow an ``OffscreenRenderer`` in the same process, DESIGN §5): the camera fitted to the
scene (a street from above, a room obliquely), and large clouds thinned on a grid so that
structure stays visible."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence

import numpy as np

from pcreg._fs import _host_tag, _pid_alive

__all__ = [
    "View",
    "crop_to_content",
    "principal_view",
    "render_clouds",
    "thin_for_display",
    "transform_points",
    "view_for",
]

#: clouds are thinned to about this many points before they are drawn (all clouds together)
MAX_DRAWN_POINTS = 150_000


def transform_points(points: np.ndarray, transform: np.ndarray) -> np.ndarray:
    """``points (N, 3)`` moved by ``transform (4, 4)`` (``R p + t``), float64."""
    t = np.asarray(transform, np.float64)
    return np.asarray(points, np.float64) @ t[:3, :3].T + t[:3, 3]


def principal_view(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Axes of ``points (N, 3)`` by decreasing spread: ``(major, middle, minor)`` unit vectors.

    Looking along the minor axis shows a scan's widest face whatever its frame convention
    (3DMatch fragments are in camera coordinates, KITTI in z-up Velodyne coordinates)."""
    centered = np.asarray(points, np.float64) - np.mean(points, axis=0)
    _, vecs = np.linalg.eigh(centered.T @ centered)
    return vecs[:, 2], vecs[:, 1], vecs[:, 0]


class View:
    """A camera for :func:`render_clouds`: ``front (3,)`` (from the scene towards the camera),
    ``up (3,)``, and ``aspect`` (height / width of the scene as seen; the image follows it).
    ``overhead``: looking straight down the thin axis of a flat scene (a street). ``axes``:
    the scene's ``(major, middle, minor)`` unit axes, the minor one signed as the view sees it
    (the HTML report lays its scale grid in the major-middle plane)."""

    def __init__(
        self,
        front: np.ndarray,
        up: np.ndarray,
        aspect: float,
        overhead: bool,
        axes: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.front, self.up, self.aspect, self.overhead = front, up, aspect, overhead
        self.axes = axes

    def __repr__(self) -> str:
        return f"View(overhead={self.overhead}, aspect={self.aspect:.2f})"


#: a scene whose thinnest spread is under this share of its middle one is drawn from above
FLAT_RATIO = 0.25


def view_for(points: np.ndarray) -> View:
    """The camera for ``points (N, 3)``: a flat scene (a street: the thin axis's spread under
    :data:`FLAT_RATIO` of the middle one) straight from above, its long side across; anything
    else (a room, an object) along its thin axis tilted 30 degrees. The thin axis is signed so
    that its largest component is positive (z-up data is seen from above, not below)."""
    pts = np.asarray(points, np.float64)
    major, middle, minor = principal_view(pts)
    minor = minor if minor[np.argmax(np.abs(minor))] > 0 else -minor
    spread = [float(np.ptp(pts @ a)) for a in (major, middle, minor)]
    overhead = spread[2] < FLAT_RATIO * max(spread[1], 1e-12)
    if overhead:
        front, up = minor, middle
        aspect = spread[1] / max(spread[0], 1e-12)
    else:
        front = minor * np.cos(np.radians(30)) - middle * np.sin(np.radians(30))
        up = middle
        aspect = (spread[1] * np.cos(np.radians(30)) + spread[2] * np.sin(np.radians(30))) / max(
            spread[0], 1e-12
        )
    return View(front, up, float(aspect), overhead, (major, middle, minor))


def thin_for_display(points: np.ndarray, target: int = MAX_DRAWN_POINTS) -> np.ndarray:
    """At most about ``target`` of ``points (N, 3)``: one point per cell of a grid sized so
    that about ``target`` cells are occupied (deterministic; dense regions lose most, so a
    2M-point scan keeps its structure instead of saturating into a blob). Returned as given
    when it is small enough."""
    pts = np.asarray(points, np.float64)
    if len(pts) <= target:
        return pts
    import open3d as o3d

    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(pts))
    # a scan is a surface: cells of side s hold ~area / s^2 points; start there and grow
    extent = np.ptp(pts, axis=0)
    area = max(float(np.sort(extent)[1:].prod()), 1e-12)
    cell = float(np.sqrt(area / target))
    fine, coarse = 0.0, None  # cells known to keep too many / too few points
    down = pts
    for _ in range(12):
        down = np.asarray(cloud.voxel_down_sample(cell).points)
        if len(down) > 1.1 * target:  # grow: by the surface rule until bracketed, then halve
            fine = cell
            cell = (
                cell * float(np.sqrt(len(down) / target)) if coarse is None else (cell + coarse) / 2
            )
        elif len(down) < 0.6 * target:
            coarse = cell
            cell = (fine + cell) / 2
        else:
            break
    return down


def point_size_for(drawn: int, width: int, height: int) -> float:
    """Pixels per point: about a third of the spacing the points would have if they covered the
    image evenly, between 1 and 3 (150k points on 1200 x 900: 1 px; 40k: 1.6 px)."""
    return float(np.clip(0.3 * np.sqrt(width * height / max(drawn, 1)), 1.0, 3.0))


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
    width: int = 1200,
    height: int | None = None,
    view: View | None = None,
    point_size: float | None = None,
    max_points: int = MAX_DRAWN_POINTS,
    crop: bool = False,
) -> np.ndarray:
    """Render coloured clouds (and optional segments) to an RGB image.

    Args:
        clouds: ``[(points (N, 3), rgb in [0, 1]), ...]``; thinned together to about
            ``max_points`` (:func:`thin_for_display`, each cloud its share).
        lines: optional ``(starts (K, 3), ends (K, 3))`` drawn as segments, in
            ``line_color`` (one rgb, or ``(K, 3)`` one per segment; later segments on top).
        height: default: ``width`` times the view's aspect, within 0.45-1.0 of it.
        view: the camera; default :func:`view_for` all points.
        point_size: pixels; default :func:`point_size_for` the points drawn.
        crop: cut the image to what was drawn, with a margin of 3 % (Open3D fits the scene's
            bounding sphere to the window, which leaves a long scene small in a wide one).

    Returns:
        ``(height, width, 3) uint8``.
    """
    everything = np.vstack([np.asarray(c[0], np.float64).reshape(-1, 3) for c in clouds])
    view = view or view_for(everything)
    if height is None:
        height = round(width * float(np.clip(view.aspect, 0.45, 1.0)))
    total = max(len(everything), 1)
    # drawn about the middle of what is drawn: the renderer works in float32, which keeps
    # only ~0.5 m at a UTM northing of 4.2e6 m (a georeferenced room came out as bands)
    origin = (everything.min(0) + everything.max(0)) / 2 if len(everything) else np.zeros(3)
    drawn = [
        (thin_for_display(np.asarray(p, np.float64).reshape(-1, 3) - origin,
                          max(1, int(max_points * len(p) / total))), c)
        for p, c in clouds
    ]  # fmt: skip
    if lines is not None:
        lines = (
            np.asarray(lines[0], np.float64) - origin,
            np.asarray(lines[1], np.float64) - origin,
        )
    if point_size is None:
        point_size = point_size_for(sum(len(p) for p, _ in drawn), width, height)
    with _render_environment():
        image = _render_clouds(drawn, lines, line_color, width, height, view, point_size)
    return crop_to_content(image) if crop else image


def crop_to_content(image: np.ndarray, margin: float = 0.03) -> np.ndarray:
    """``image (H, W, 3) uint8`` cut to its non-white pixels plus ``margin`` of the larger
    side (as given when nothing was drawn)."""
    drawn = np.nonzero((image < 250).any(axis=2))
    if not len(drawn[0]):
        return image
    pad = int(margin * max(image.shape[:2]))
    top, left = max(drawn[0].min() - pad, 0), max(drawn[1].min() - pad, 0)
    return image[top : drawn[0].max() + pad + 1, left : drawn[1].max() + pad + 1]


def _render_clouds(
    clouds: Sequence[tuple[np.ndarray, Sequence[float]]],
    lines: tuple[np.ndarray, np.ndarray] | None,
    line_color: Sequence[float] | np.ndarray,
    width: int,
    height: int,
    view: View,
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
        ctrl.set_front(list(view.front))
        ctrl.set_up(list(view.up))
        ctrl.set_lookat(((everything.min(0) + everything.max(0)) / 2).tolist())
        ctrl.set_zoom(0.7)
        vis.poll_events()
        vis.update_renderer()
        image = np.asarray(vis.capture_screen_float_buffer(do_render=True))
    finally:
        vis.destroy_window()
    return (np.clip(image, 0, 1) * 255).astype(np.uint8)
