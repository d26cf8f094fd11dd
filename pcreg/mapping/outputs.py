"""The files of a map (``pcreg map --out DIR``), each written atomically; none replaces an
existing file without ``overwrite``.

- ``poses.txt``: KITTI layout, one line of 12 numbers (``T_world_scan``'s 3x4 rows) per
  scan in the order given; an unplaced scan's line is 12 ``nan`` (the line count always
  equals the scan count, so line k is scan k).
- ``poses.txt.json``: the sidecar (as ``pcreg odometry``'s): frame (the reference scan),
  convention, units, scans, every candidate edge with its verdict, information matrix,
  residuals and whether the graph kept it, and the unplaced scans with the reason.
- ``map.ply``: the placed scans merged in the world frame, thinned to one point per voxel
  (the first scan's point wins, so colours stay pure), coloured by scan
  (:func:`pcreg.viz.maps.scan_colors`), float64 binary PLY.
- ``map.png``: two orthographic views with the graph's kept (black) and rejected (dashed
  red) edges between the scans' centres (:func:`pcreg.viz.maps.save_map_png`).
- ``report.html``: the same, in 3-D, offline (:func:`pcreg.viz.maps.write_map_report`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pcreg._fs import atomic_output, output_group, quiet_native
from pcreg.mapping.build import MapResult

__all__ = ["OUTPUT_NAMES", "check_out_dir", "merged_map", "output_paths", "write_map"]

logger = logging.getLogger(__name__)

#: the files of a map directory, by role
OUTPUT_NAMES = {
    "poses": "poses.txt",
    "sidecar": "poses.txt.json",
    "map": "map.ply",
    "png": "map.png",
    "report": "report.html",
}


def output_paths(out: str | os.PathLike[str]) -> dict[str, Path]:
    """The output files of ``out`` by role (:data:`OUTPUT_NAMES`)."""
    return {role: Path(out) / name for role, name in OUTPUT_NAMES.items()}


def check_out_dir(out: str | os.PathLike[str], *, overwrite: bool = False) -> dict[str, Path]:
    """Refuse, before any work, an ``out`` that is not a directory, an output file that exists
    (without ``overwrite``) or cannot be written, or a missing ``out`` whose nearest existing
    parent is not a writable directory, that passes through a symbolic link to nothing, or
    has a name longer than the file system takes. Creates nothing. Returns :func:`output_paths`.

    Raises:
        OutputExistsError, UnwritableOutputError: as :func:`pcreg._fs.check_writable`.
    """
    from pcreg._fs import check_writable
    from pcreg.errors import UnwritableOutputError

    out = Path(out)
    paths = output_paths(out)
    there = _present(out, out, follow=False)
    parent, missing = out.absolute().parent, [out.name]
    while not there and not _present(parent, out):  # what mkdir will have to create
        missing.append(parent.name)
        parent = parent.parent
    if not there:
        try:
            longest = os.pathconf(parent, "PC_NAME_MAX")
        except (OSError, ValueError):  # the file system does not say
            longest = None
        for name in missing:
            if longest is not None and len(os.fsencode(name)) > longest:
                raise UnwritableOutputError(
                    out,
                    f"cannot be made: a name of {len(os.fsencode(name))} bytes, over the "
                    f"file system's {longest}",
                )
    if there:
        if not out.is_dir():
            dangling = out.is_symlink() and not out.exists()
            raise UnwritableOutputError(
                out, "is a symbolic link to nothing" if dangling else "--out must be a directory"
            )
        for path in paths.values():
            check_writable(path, overwrite=overwrite)
        return paths
    if not parent.is_dir():
        raise UnwritableOutputError(out, f"{str(parent)!r} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UnwritableOutputError(out, f"cannot create the directory in {str(parent)!r}")
    return paths


def _present(path: Path, out: Path, follow: bool = True) -> bool:
    """Whether ``path`` exists (``follow``: through symbolic links), by ``os.stat`` itself
    (``Path.exists`` swallows every error from Python 3.13 on).

    Raises:
        UnwritableOutputError: naming ``out``: a symbolic link to nothing or in a loop on the
            way (mkdir would fail on it after the whole run), a name too long, no permission.
    """
    import errno

    from pcreg.errors import UnwritableOutputError

    try:
        (os.stat if follow else os.lstat)(path)
        return True
    except (FileNotFoundError, NotADirectoryError):  # a file on the way: reported later
        if follow and os.path.islink(path):
            raise UnwritableOutputError(
                out, f"{str(path)!r} is a symbolic link to nothing"
            ) from None
        return False
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnwritableOutputError(out, f"{str(path)!r} is a loop of symbolic links") from None
        raise UnwritableOutputError(out, f"cannot be made ({err.strerror})") from None


def world_scans(result: MapResult, clouds: Sequence[np.ndarray]) -> list[np.ndarray | None]:
    """Every scan moved into the world frame (``(N_k, 3)`` float64), None where unplaced."""
    out: list[np.ndarray | None] = []
    for cloud, pose, ok in zip(clouds, result.poses, result.placed, strict=True):
        pts = np.asarray(cloud, np.float64)
        out.append(pts @ pose[:3, :3].T + pose[:3, 3] if ok else None)
    return out


def merged_map(scans: Sequence[np.ndarray | None], voxel: float) -> tuple[np.ndarray, np.ndarray]:
    """``(points (M, 3) float64, scan index (M,) int)``: the placed scans merged, one point
    per ``voxel`` cube (the earliest scan's first point in it)."""
    parts = [(np.asarray(s), k) for k, s in enumerate(scans) if s is not None and len(s)]
    points = np.concatenate([p for p, _ in parts])
    owner = np.concatenate([np.full(len(p), k) for p, k in parts])
    keys = np.floor((points - points.min(0)) / voxel).astype(np.int64)
    _, first = np.unique(keys, axis=0, return_index=True)
    first.sort()
    return points[first], owner[first]


def write_map(
    out: str | os.PathLike[str],
    result: MapResult,
    clouds: Sequence[np.ndarray],
    *,
    voxel: float | None = None,
    overwrite: bool = False,
    title: str = "",
) -> dict[str, Path]:
    """Write every file of a map into ``out`` (created if absent; see the module docstring).

    Args:
        out: the directory.
        result: the map (:func:`~pcreg.mapping.build.build_map`).
        clouds: its scans ``(N_k, 3)``, input units, in the order given.
        voxel: the map's voxel, input units (default: the median registration voxel, or
            1/200 of the map's diagonal when no edge registered).
        overwrite: replace existing files.
        title: the picture's and the report's title.

    Returns:
        The paths written, by role.

    Raises:
        OutputExistsError: a file exists and ``overwrite`` is False (checked for all of them
            before any is written).
        UnwritableOutputError: the directory cannot be created or written.
    """

    from pcreg.errors import UnwritableOutputError

    check_out_dir(out, overwrite=overwrite)
    made: list[Path] = []  # the folders this call created, outermost first
    try:
        try:
            _make_folders(Path(out), made)
        except OSError as err:
            why = f"cannot create the directory ({err.strerror})"
            raise UnwritableOutputError(out, why) from None
        paths = check_out_dir(out, overwrite=overwrite)
        with output_group():  # every file of the map, or none (an interrupted run)
            _write_files(paths, result, clouds, voxel, overwrite, title)
    except BaseException:  # a failed or interrupted map leaves no folder it created behind
        for folder in reversed(made):  # innermost first; one that holds anything stays
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return paths


def _make_folders(folder: Path, made: list[Path]) -> None:
    """``mkdir -p folder``, appending to ``made`` each folder this call itself created (one
    that appears meanwhile, made by someone else, is not: it is never removed)."""
    try:
        os.mkdir(folder)
    except FileNotFoundError:
        if folder.parent == folder:
            raise
        _make_folders(folder.parent, made)
        _make_folders(folder, made)
        return
    except FileExistsError:
        if not folder.is_dir():
            raise
        return
    made.append(folder)


#: bytes of one vertex of the map's binary PLY: x, y, z as double, red, green, blue as uchar
_PLY_VERTEX_BYTES = 3 * 8 + 3


def _check_ply_size(tmp: Path, target: Path, count: int) -> None:
    """Refuse a binary PLY of ``count`` coloured points that is not the size they take after
    its header: Open3D (RPly) reports success on a write cut short by a full disk or
    ``ulimit -f``.

    Raises:
        OSError: ``errno.EIO`` naming ``target``."""
    import errno

    with open(tmp, "rb") as handle:
        head = handle.read(4096)
    end = head.find(b"end_header\n")
    if end < 0:
        raise OSError(errno.EIO, "the PLY's header was cut short: is the disk full?", str(target))
    want, size = end + len(b"end_header\n") + count * _PLY_VERTEX_BYTES, tmp.stat().st_size
    if size != want:
        why = f"the PLY is {size} bytes, its {count} points take {want}: is the disk full?"
        raise OSError(errno.EIO, why, str(target))


def _write_files(paths, result, clouds, voxel, overwrite, title) -> None:
    """:func:`write_map`'s files, into the checked ``paths``."""
    import open3d as o3d

    from pcreg.errors import UnwritableOutputError
    from pcreg.viz.maps import save_map_png, scan_colors, write_map_report

    rows = result.poses[:, :3, :4].reshape(len(result.poses), 12)  # NaN rows: unplaced
    with atomic_output(paths["poses"], overwrite=overwrite) as tmp:
        np.savetxt(tmp, rows, fmt="%.9e")
        with atomic_output(paths["sidecar"], overwrite=overwrite) as side:
            side.write_text(json.dumps(result.record(), indent=1) + "\n")
    scans = world_scans(result, clouds)
    if voxel is None:
        voxel = result.voxel
        if not np.isfinite(voxel):
            placed = np.concatenate([s for s in scans if s is not None])
            voxel = float(np.linalg.norm(np.ptp(placed, axis=0))) / 200 or 1.0
    points, owner = merged_map(scans, voxel)
    colors = scan_colors(len(clouds))
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    cloud.colors = o3d.utility.Vector3dVector(colors[owner])
    with atomic_output(paths["map"], overwrite=overwrite) as tmp:
        with quiet_native() as printed:  # RPly prints a line per failed value
            written = o3d.io.write_point_cloud(str(tmp), cloud, write_ascii=False)
        if printed[0].strip():
            logger.debug("Open3D writing %s: %s", paths["map"], printed[0].strip())
        if not written:
            raise UnwritableOutputError(paths["map"], "Open3D could not write the PLY")
        _check_ply_size(tmp, paths["map"], len(points))
    kept = [(e.src, e.ref) for e in result.edges if e.kept]
    rejected = [(e.src, e.ref) for e in result.edges if e.registered and not e.kept]
    labels = [os.path.basename(n) for n in result.names]
    placed_count = int(result.placed.sum())
    title = title or (
        f"pcreg map: {placed_count} of {len(clouds)} scans placed, {len(kept)} edges kept, "
        f"{len(rejected)} rejected"
    )
    unit = result.metres_per_unit
    save_map_png(paths["png"], scans, kept, rejected, labels=labels, title=title, unit=unit,
                 overwrite=overwrite)  # fmt: skip
    facts = {
        "world frame": f"scan {result.reference}: {result.names[result.reference]}",
        "scans placed": f"{placed_count} of {len(clouds)}",
        "unplaced": {result.names[k]: why for k, why in sorted(result.unplaced.items())} or "-",
        "candidate pairs": f"{len(result.edges)} ({result.candidates}"
        + (", sequence)" if result.sequence else ")"),
        "registered": sum(e.registered for e in result.edges),
        "kept by the graph": len(kept),
        "rejected by the graph": {
            f"{labels[e.src]} -> {labels[e.ref]}": e.rejected
            for e in result.edges if e.registered and not e.kept
        } or "-",
        "units": result.units,
        "map voxel": f"{voxel:g} (input units)",
    }  # fmt: skip
    write_map_report(paths["report"], scans, kept, rejected, labels=labels, facts=facts,
                     title=title, unit=unit, overwrite=overwrite)  # fmt: skip
