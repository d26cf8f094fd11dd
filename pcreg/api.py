"""``pcreg.register``: one call from two point clouds to ``T_ref_src``.

>>> import pcreg                                                     # doctest: +SKIP
>>> result = pcreg.register("src.ply", "ref.ply", model="indoor")    # doctest: +SKIP
>>> result.transform                  # (4, 4): maps source points into the reference frame

:func:`map` places many scans in one frame (multiway registration over a pose graph,
:mod:`pcreg.mapping`).

Inputs may be file paths (any format :func:`pcreg.io.read_points` reads), ``(N, 3)`` numpy
arrays, torch tensors or Open3D point clouds, in metres. Two methods: the learned network
(``"geotransformer"``, shipped weights or any checkpoint) and Open3D's FPFH + RANSAC
(``"fpfh-ransac"``); either may be refined by point-to-plane ICP.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pcreg.io import read_points
from pcreg.registration.checks import check_counts
from pcreg.registration.inputs import as_points
from pcreg.registration.pipeline import METHODS, MIN_POINTS, Registration, TooFewPointsError
from pcreg.registration.result import RegistrationResult

__all__ = [
    "METHODS",
    "MIN_POINTS",
    "RegistrationResult",
    "TooFewPointsError",
    "as_points",
    "load_model",
    "map",
    "pipeline",
    "register",
    "register_points",
]


def _network(model: str, device: str):
    """The network of ``model`` on ``device``, loaded once per process and shared by every
    pipeline (changing the search settings between calls reuses the weights). Cached by the
    checkpoint file itself (resolved path, inode, size, modification time): a relative path
    named from another directory, or a checkpoint rewritten in place, is loaded anew."""
    from pcreg.errors import InputError
    from pcreg.registration.shipped import weights_path

    try:
        path = weights_path(model)
        st = path.stat()
        key: tuple = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    except (InputError, OSError):  # load_network raises the user's error
        key = (os.fspath(model),)
    return _cached_network(key, os.fspath(model), device)


@functools.lru_cache(maxsize=4)
def _cached_network(key: tuple, model: str, device: str):
    from pcreg.registration.networks import load_for_registration

    return load_for_registration(model, device)


def pipeline(
    model: str | os.PathLike[str] | None = None,
    *,
    method: str = "geotransformer",
    icp: bool = True,
    voxel_size: float | None = None,
    device: str = "cpu",
    orientation_keep: float | None = None,
    max_memory: int | str | None = None,
    strict: bool = False,
    units: str | None = None,
) -> Registration:
    """The :class:`~pcreg.registration.Registration` pipeline :func:`register` runs, with the
    networks cached per process (the arguments as for :func:`register`)."""
    search = {} if orientation_keep is None else {"orientation_keep": float(orientation_keep)}
    return Registration(
        model,
        method=method,
        icp=icp,
        voxel_size=voxel_size,
        device=device,
        search=search,
        networks=_network,
        max_memory=max_memory,
        strict=strict,
        units=units,
    )


def load_model(
    model: str | os.PathLike[str] = "indoor", device: str = "cpu", **kwargs: Any
) -> Registration:
    """A pipeline bound to one network (``"indoor"``, ``"outdoor"`` or a checkpoint path),
    loaded now, for repeated calls ``pipe(src, ref)`` on validated ``(N, 3)`` arrays.
    ``kwargs``: the other :func:`pipeline` arguments (e.g. ``orientation_keep=0.0``)."""
    pipe = pipeline(model, device=device, **kwargs)
    _network(os.fspath(model), device)
    return pipe


def register(
    src: Any,
    ref: Any,
    model: str | os.PathLike[str] | None = None,
    *,
    method: str = "auto",
    icp: bool = True,
    voxel_size: float | None = None,
    device: str = "cpu",
    orientation_keep: float | None = None,
    max_memory: int | str | None = None,
    strict: bool = False,
    units: str | None = None,
) -> RegistrationResult:
    """Estimate ``T_ref_src`` that moves ``src`` onto ``ref``.

    Args:
        src, ref: paths, ``(N, 3)`` arrays / tensors (metres), or Open3D point clouds.
        model: ``"indoor"``, ``"outdoor"``, a checkpoint path, or None to choose from the
            clouds' extent (> 20 m: outdoor). For ``fpfh-ransac`` it picks the voxel default.
        method: ``"auto"`` (default: the network, and Open3D FPFH + RANSAC where the
            network's estimate does not verify; any unit, objects included: see
            :mod:`pcreg.registration.auto`), ``"geotransformer"`` (the learned network alone)
            or ``"fpfh-ransac"`` (the classical pipeline alone); these two take metres.
        icp: refine with point-to-plane ICP at ``voxel_size``, to convergence (default on:
            a more accurate and far more stable estimate for 0.03-0.09 s; see
            :class:`~pcreg.registration.Registration`). ``False``: the method's own estimate.
        voxel_size: FPFH + RANSAC and ICP voxel in metres (default 5 cm indoor, 0.3 m
            outdoor). The network always voxelizes at the size it was trained with.
        device: ``"cpu"`` or ``"cuda"`` for the network.
        orientation_keep: for a model with the Manhattan orientation search (``indoor``), run
            the cube hypotheses ranked within this fraction of the best (0 to 1; 0 runs all
            24: slower, occasionally a pair more at low overlap). None keeps the model's
            setting (0.7 for ``indoor``). Ignored by models without the search. Changing it
            never reloads the weights.
        max_memory: cap on the pair's estimated memory (bytes or a size such as ``"8G"``;
            default 4 GiB or 80 % of the available memory). A pair over it is refused.
        strict: ``auto`` only: a registered estimate stands only where the other,
            independent path (the network's search vs FPFH + RANSAC alone) reached the same
            pose; else the result is not registered (ambiguous).
        units: ``auto`` only: the input's unit, ``"metres"``, ``"millimetres"``,
            ``"centimetres"`` or ``"object"`` (an object of any size, scaled for the network);
            default: read from the clouds' extent and sampling (``result.readings`` lists
            the readings tried and their scores).

    Coordinates far from the origin (georeferenced, UTM) are fine: the pair is shifted to its
    reference's median in float64 before anything is cast to float32, and the transform is
    returned in the input frame. ``result.registered`` says whether the estimate rests on
    support, ``result.reason`` why not.

    Raises:
        InputError: unreadable or empty input, or one with no valid (finite) point, too few
            points, identical points, clouds whose scales differ by more than 10x (50x for
            ``method="auto"``, which searches a cloud 10-50x smaller inside the other), an
            estimated memory over ``max_memory``, an unknown method or model. (Invalid
            points are dropped and counted in ``result.dropped_invalid``: see
            :func:`as_points`.)
    """
    start = time.perf_counter()
    names = (
        os.fspath(src) if isinstance(src, (str, os.PathLike)) else "src",
        os.fspath(ref) if isinstance(ref, (str, os.PathLike)) else "ref",
    )
    infos = []
    src_pts = as_points(src, names[0], infos, max_memory)
    ref_pts = as_points(ref, names[1], infos, max_memory)
    check_counts(src_pts, ref_pts, names)  # before any reading of the units divides by extent
    options = {"method": method, "icp": icp, "voxel_size": voxel_size, "device": device}
    pipe = pipeline(
        model, **options, orientation_keep=orientation_keep, max_memory=max_memory, strict=strict,
        units=units,
    )  # fmt: skip
    result = pipe(src_pts, ref_pts, names)
    result.dropped_invalid = (infos[0].dropped_invalid, infos[1].dropped_invalid)
    now = time.perf_counter()  # one clock reading: load + the pipeline's total = total
    result.timings["load"] = now - start - result.timings["total"]
    result.timings["total"] = now - start
    return result


def register_points(
    src_pts: np.ndarray,
    ref_pts: np.ndarray,
    model: str | os.PathLike[str] | None = None,
    *,
    method: str = "auto",
    icp: bool = True,
    voxel_size: float | None = None,
    device: str = "cpu",
    names: tuple[str, str] = ("src", "ref"),
    orientation_keep: float | None = None,
    max_memory: int | str | None = None,
    strict: bool = False,
    units: str | None = None,
) -> RegistrationResult:
    """:func:`register` on validated ``(N, 3)`` arrays; ``names`` label them in errors."""
    check_counts(src_pts, ref_pts, names)  # before any reading of the units divides by extent
    pipe = pipeline(
        model,
        method=method,
        icp=icp,
        voxel_size=voxel_size,
        device=device,
        orientation_keep=orientation_keep,
        max_memory=max_memory,
        strict=strict,
        units=units,
    )
    return pipe(src_pts, ref_pts, names)


def map(  # the package's verb, pcreg.map(scans); the builtin is not used in this module
    scans: Any,
    out: str | os.PathLike[str] | None = None,
    model: str | os.PathLike[str] | None = None,
    *,
    method: str = "auto",
    icp: bool = True,
    voxel_size: float | None = None,
    sequence: bool = False,
    candidates: str = "all",
    neighbours: int = 5,
    workers: int | None = None,
    address: str | None = None,
    max_memory: int | str | None = None,
    nan_policy: str = "drop",
    map_voxel: float | None = None,
    overwrite: bool = False,
    progress: bool = False,
    before_writing: Callable[[Any], None] | None = None,
):
    """Place many scans in one frame: register candidate pairs, keep the edges a pose graph
    finds consistent, and give every scan ``T_world_scan`` (:mod:`pcreg.mapping`).

    Args:
        scans: a sequence of scans (paths in any format :func:`pcreg.io.read_points` reads,
            ``(N, 3)`` arrays / tensors, Open3D clouds), or one string or path naming a
            directory of point files or a glob pattern; at least two scans.
        out: a directory to write ``poses.txt``, ``poses.txt.json``, ``map.ply``,
            ``map.png`` and ``report.html`` into (:mod:`pcreg.mapping.outputs`); None:
            write nothing.
        model, method, icp, voxel_size, max_memory: the registration of every pair, as for
            :func:`register` (default ``method="auto"``: any unit, objects included).
        sequence: the scans are in time order: consecutive pairs and loop closure candidates
            instead of an unordered set.
        candidates: ``"all"`` pairs, or ``"knn"``: each scan's ``neighbours`` best partners
            by a cheap FPFH overlap score (:mod:`pcreg.mapping.candidates`).
        workers, address: the pairs run on Ray (a local cluster of ``workers`` CPUs, default
            all cores, or the cluster at ``address``); ``workers=1``: in this process.
        nan_policy: :func:`pcreg.io.read_points`'s, for scans given as files.
        map_voxel: the voxel of ``map.ply`` in input units (default the registrations').
        overwrite: replace existing files in ``out``.
        progress: a progress bar over the pairs.
        before_writing: called with the map before its files are written (the command line
            prints its summary there: a full or closed stdout then leaves no files).

    Returns:
        A :class:`~pcreg.mapping.MapResult`: ``poses (K, 4, 4)`` ``T_world_scan`` in the
        order given, the world being the first scan's frame (``result.reference`` says
        otherwise when the first scan could not be placed), NaN for an unplaced scan
        (``result.unplaced`` says why); ``result.edges`` every candidate with its verdict
        and whether the graph kept it.

    Raises:
        InputError: fewer than two scans, an unreadable scan, a pair the pipeline refuses, an
            existing output without ``overwrite``.
    """
    from pcreg.batch.runner import BatchOptions, check_cluster_arguments
    from pcreg.io_formats.listing import scan_list
    from pcreg.mapping import build_map, write_map
    from pcreg.mapping.outputs import check_out_dir
    from pcreg.registration.resources import read_cap

    check_cluster_arguments(address, workers)  # workers under 1, an address nothing answers at
    if isinstance(scans, (str, os.PathLike)):
        scans = scan_list([scans])
    names, clouds = [], []
    for k, scan in enumerate(scans):
        if isinstance(scan, (str, os.PathLike)):
            names.append(os.fspath(scan))
            clouds.append(read_points(scan, nan_policy=nan_policy, max_memory=read_cap(max_memory)))
        else:
            names.append(f"scan {k}")
            clouds.append(as_points(scan, f"scan {k}"))
        # a scan that cannot register with anything is refused now, before any pair runs
        check_counts(clouds[-1], clouds[-1], (names[-1], names[-1]))
    if out is not None:  # an existing output is refused before any registration runs
        check_out_dir(out, overwrite=overwrite)
    options = BatchOptions(
        None if model is None else os.fspath(model), method, icp, voxel_size,
        max_memory=max_memory, nan_policy=nan_policy,
    )  # fmt: skip
    result = build_map(
        clouds, names, options=options, sequence=sequence, candidates=candidates,
        neighbours=neighbours, workers=workers, address=address, progress=progress,
    )  # fmt: skip
    if before_writing is not None:
        before_writing(result)
    if out is not None:
        write_map(out, result, clouds, voxel=map_voxel, overwrite=overwrite)
    return result
