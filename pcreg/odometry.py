"""LiDAR odometry by chaining pairwise registrations: scan k is registered onto scan k-1 and
the relative motions are composed, ``P_k = P_{k-1} @ T_{k-1 <- k}`` with ``P_0 = I``, so every
pose maps points of scan k into the frame of the first scan (KITTI's convention for its
``poses/XX.txt``).

Frames: :func:`run_odometry` gives poses in the scanner's own frame (``"lidar"``: for KITTI the
Velodyne's). KITTI's official poses are those of the left camera (``"camera"``, cam0), which
:meth:`OdometryResult.in_camera_frame` converts to with the ``Tr:`` (Velodyne -> cam0) line of
the sequence's ``calib.txt``: ``P_k = Tr V_k inv(Tr)``. The two frames' origins are ~0.3 m
apart, so comparing poses of one frame with the other's gives a fake error of that order.

A poses file written with a ``record`` (:func:`write_kitti_poses`) gets a sidecar JSON,
``<poses file>.json`` (``05.txt`` -> ``05.txt.json``), saying which frame it is in, with
which calibration, from which scans; the poses file itself stays 12 numbers a line so that
``evo`` and KITTI's devkit read it.

Breaks: a consecutive pair that does not register (``result.registered`` false) breaks the
chain there; the run goes on. The scans are then split into *segments* of registered pairs,
numbered from 0 in input order, and every pose maps its scan into the frame of the *first
scan of its own segment* (``P = I`` there, again), not the first scan's: the motion across a
break is unknown, and a guess would be a wrong pose that looks right. The poses file keeps one
valid rigid row per scan (``evo`` reads it; only segment 0 is in the first scan's frame), the
relative motion of a broken pair is NaN (``null`` in JSON), and the sidecar says it:
``"segments"`` (the segment of every scan) and ``"breaks"`` (each broken pair, its scans and
the reason). ``pcreg odometry`` writes its outputs all the same and exits 3.

Loop closure (``loop_closure=True``, ``pcreg odometry --loop-closure``): the sequence goes
through a map's pose graph (:mod:`pcreg.mapping`) instead of the chain: the consecutive pairs
are registered, then each scan's ``neighbours`` best partners by the FPFH overlap score among
its *revisits*, the scans the chained consecutive pairs say the sequence came back to
(:func:`pcreg.mapping.build.sequence_edges`, :func:`pcreg.mapping.candidates.revisits`), and
the graph keeps the edges that agree and optimises the poses. A sequence that never comes back
(a straight drive) has no loop candidate, and its poses are the chain's. One rule for
both modes: one valid pose per scan, in the frame of the first scan of its segment. With loop
closure, segment 0 holds the scans the graph connects to the first scan (a map's placed
scans), and a scan it cannot place starts the next segment, with the scans the graph connects
to it (:func:`pcreg.mapping.segments.place_segments`); segments need not be contiguous (a loop
edge may bring a later scan back to segment 0), a consecutive pair that did not register
breaks nothing when other edges bridge it, and one the graph rejected can. ``relative`` is then
the optimised ``inv(P_{k-1}) P_k`` (NaN across segments), and the sidecar adds
``"loop_closure"``: the candidates, every edge's verdict and whether the graph kept it, and
the kept loop edges (``"loops"``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pcreg.errors import InputError, MissingFileError
from pcreg.io_formats.listing import scan_list  # was defined here; still exported
from pcreg.odometry_outputs import (  # were defined here; still exported
    CONVENTION,
    CONVENTION_LOOP,
    FRAMES,
    find_calib,
    resolve_calib,
    save_trajectory_png,
    sidecar_path,
    trajectory_figure,
    write_kitti_poses,
)

__all__ = [
    "CONVENTION",
    "CONVENTION_LOOP",
    "FRAMES",
    "OdometryResult",
    "find_calib",
    "pose_record",
    "resolve_calib",
    "run_odometry",
    "save_trajectory_png",
    "scan_list",
    "sidecar_path",
    "trajectory_figure",
    "write_kitti_poses",
]

logger = logging.getLogger(__name__)


@dataclass
class OdometryResult:
    """``poses (K, 4, 4) float64`` (scan k -> the first scan of its segment: scan 0 unless
    the chain broke, see the module), ``relative (K-1, 4, 4)`` (``T_{k-1 <- k}``, NaN for a
    pair that did not register), seconds per registration ``times (K-1,)``, the model used,
    the ``frame`` both kinds of pose are in (``"lidar"`` or ``"camera"``, see the module),
    ``registered (K-1,) bool`` per pair (default all True) and ``reasons`` (K-1 strings, the
    verdict's reason where a pair did not register, else ``""``).

    With loop closure (see the module) also ``segment_of (K,) int`` (the graph's segments; by
    default they follow the breaks of the chain), ``starts`` ({first scan of a segment other
    than 0: why the graph could not place it earlier}), ``edges`` (every candidate
    :class:`~pcreg.mapping.edges.Edge` with its verdict and whether the graph kept it) and
    ``neighbours`` (loop candidates per scan)."""

    poses: np.ndarray
    relative: np.ndarray
    times: np.ndarray
    model: str
    frame: str = "lidar"
    registered: np.ndarray | None = None
    reasons: list[str] | None = None
    segment_of: np.ndarray | None = None
    starts: dict[int, str] | None = None
    edges: list | None = None
    neighbours: int = 0

    def __post_init__(self) -> None:
        pairs = len(self.relative)
        if self.registered is None:
            self.registered = np.ones(pairs, bool)
        self.registered = np.asarray(self.registered, bool)
        if self.reasons is None:
            self.reasons = ["" for _ in range(pairs)]

    @property
    def complete(self) -> bool:
        """One segment: every pose in scan 0's frame (the chain: every pair registered)."""
        return bool((self.segments == 0).all())

    @property
    def segments(self) -> np.ndarray:
        """``(K,) int``: the segment of every scan; the chain's: 0 up to the first break, +1
        after each; the graph's: ``segment_of``."""
        if self.segment_of is not None:
            return np.asarray(self.segment_of, int)
        return np.concatenate([[0], np.cumsum(~self.registered)]).astype(int)

    def breaks(self, scans: Sequence[str | os.PathLike[str]]) -> list[dict[str, object]]:
        """Where a segment starts, as the sidecar lists it: ``{"pair": k-1, "src": scans[k],
        "ref": scans[k-1], "reason", "segment"}`` for every scan k that starts a segment
        (``segment``: the one it starts; the chain: the pairs that did not register)."""
        names = [os.fspath(s) for s in scans]
        seg = self.segments
        out = []
        for k in range(1, len(seg)):
            if seg[k] > seg[:k].max():
                why = self.starts.get(k, "") if self.starts is not None else self.reasons[k - 1]
                out.append({"pair": k - 1, "src": names[k], "ref": names[k - 1], "reason": why,
                            "segment": int(seg[k])})  # fmt: skip
        return out

    def loop_record(self, scans: Sequence[str | os.PathLike[str]]) -> dict[str, object] | None:
        """The sidecar's ``"loop_closure"`` (None without loop closure): ``candidates``,
        ``neighbours``, counts, ``edges`` (every candidate: scans, kind, verdict, whether the
        graph kept it, why not, residuals) and ``loops`` (the kept loop edges, the same)."""
        if self.edges is None:
            return None
        names = [os.fspath(s) for s in scans]
        heavy = ("T_ref_src", "information")
        edges = [{k: v for k, v in e.to_dict(names).items() if k not in heavy} for e in self.edges]
        return {
            "candidates": "knn", "neighbours": self.neighbours, "pairs": len(edges),
            "registered": sum(e["registered"] for e in edges),
            "kept": sum(e["kept"] for e in edges),
            "loops": [e for e in edges if e["kind"] == "loop" and e["kept"]],
            "edges": edges,
        }  # fmt: skip

    def in_camera_frame(self, tr: np.ndarray) -> OdometryResult:
        """The same motions as poses of the camera: ``P_k = Tr V_k inv(Tr)`` for every pose
        and relative motion (:func:`pcreg.data.kitti.camera_poses`).

        Args:
            tr: ``(4, 4)`` ``T_cam0_velo`` in metres, the ``Tr:`` line of KITTI's
                ``calib.txt`` (:func:`pcreg.data.kitti.read_calib_tr`).

        Returns:
            A result with ``frame="camera"``: ``poses (K, 4, 4)`` map cam0 frame k into
            cam0 frame 0 (as KITTI's ``poses.txt`` made relative to the first scan's
            frame), ``relative (K-1, 4, 4)`` cam0 frame k -> cam0 frame k-1; times and model
            unchanged.

        Raises:
            InputError: the result is not in the LiDAR frame.
        """
        from pcreg.data.kitti import camera_poses

        if self.frame != "lidar":
            raise InputError("frame", f"poses are in the {self.frame} frame, not the LiDAR's")
        return replace(
            self,
            poses=camera_poses(self.poses, tr),
            relative=camera_poses(self.relative, tr),
            frame="camera",
        )


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
    nan_policy: str = "drop",
    loop_closure: bool = False,
    neighbours: int = 3,
) -> OdometryResult:
    """Register each scan onto its predecessor and chain the motions (see module docstring);
    with ``loop_closure``, place the scans by a pose graph over the consecutive pairs and each
    scan's ``neighbours`` best loop candidates instead (module docstring, "Loop closure").

    The consecutive pairs are independent, so they run in parallel on Ray
    (:class:`~pcreg.batch.runner.RayRunner`: a local cluster of ``workers`` CPUs, default all
    cores, or the cluster at ``address`` / ``RAY_ADDRESS``), and the motions are chained in
    order afterwards. ``workers=1`` (or a single pair, without ``address``) registers them
    one by one in this process instead, without starting Ray.

    Raises:
        InputError: fewer than two scans, or any scan that :func:`pcreg.api.register` rejects;
            with ``loop_closure``, a device other than the CPU or ``neighbours`` under 1.

    A consecutive pair that does not register is not an error: the chain breaks there and
    the scans after it start a new segment (see the module docstring; ``result.complete``,
    ``result.registered``, ``result.reasons`` say where and why).
    """
    if len(scans) < 2:
        raise InputError("scans", f"odometry needs at least two scans, got {len(scans)}")
    names = [os.fspath(s) for s in scans]
    for name in names:  # before any registration runs
        if not Path(name).is_file():
            raise MissingFileError(name, "scan not found")
    if workers is not None and workers < 1:
        raise InputError("workers", f"must be at least 1, got {workers}")
    if loop_closure:
        from pcreg.batch.runner import BatchOptions
        from pcreg.engine.heap import retaining

        if device != "cpu":
            raise InputError("device", "odometry with loop closure registers on the CPU")
        options = BatchOptions(
            model, method, icp, voxel_size, retain_heap=retaining(), max_memory=max_memory,
            nan_policy=nan_policy,
        )  # fmt: skip
        return _through_graph(names, options, neighbours, workers, address, progress)
    if address is None and (workers == 1 or len(names) == 2 or device != "cpu"):
        relative, times, used, reasons = _serial(
            names, model, method, icp, voxel_size, device, progress, max_memory, nan_policy
        )
    else:
        if device != "cpu":
            raise InputError("device", "parallel odometry runs on the CPU (--device cpu)")
        from pcreg.io import read_points
        from pcreg.registration.resources import read_cap

        for name in names:  # a bad scan is reported before the cluster starts
            read_points(name, nan_policy=nan_policy, max_memory=read_cap(max_memory))
        relative, times, used, reasons = _on_ray(
            names, model, method, icp, voxel_size, workers, address, progress, max_memory,
            nan_policy,
        )  # fmt: skip
    registered = np.array([r is None for r in reasons], bool)
    poses = [np.eye(4)]
    for t, ok in zip(relative, registered, strict=True):
        poses.append(poses[-1] @ t if ok else np.eye(4))  # a break: a new segment starts
    for k in np.flatnonzero(~registered).tolist():  # the command line says it in one line
        logger.info(
            "%s -> %s: not registered: %s; the odometry chain breaks there (segment %d "
            "starts at %s)", names[k + 1], names[k], reasons[k], int((~registered[: k + 1]).sum()),
            names[k + 1],
        )  # fmt: skip
    return OdometryResult(
        np.stack(poses),
        np.stack(relative),
        np.asarray(times),
        used or "auto",
        registered=registered,
        reasons=[r or "" for r in reasons],
    )


_BROKEN = np.full((4, 4), np.nan)  # the relative motion of a pair that did not register


def _through_graph(names, options, neighbours, workers, address, progress) -> OdometryResult:
    """The sequence through a map's pose graph, split into segments (module docstring)."""
    from pcreg.io import read_points
    from pcreg.mapping import place_segments, sequence_edges
    from pcreg.registration.resources import read_cap

    if neighbours < 1:
        raise InputError("neighbours", f"must be at least 1, got {neighbours}")
    cap = read_cap(options.max_memory)
    clouds = [read_points(n, nan_policy=options.nan_policy, max_memory=cap) for n in names]
    edges, _ = sequence_edges(
        clouds, names, options, neighbours=neighbours, workers=workers, address=address,
        progress=progress,
    )  # fmt: skip
    logger.info("loop closure: %d scans, %d candidate pairs (%d loop candidates)", len(names),
                len(edges), sum(e.kind == "loop" for e in edges))  # fmt: skip
    placed = place_segments(clouds, edges)
    consecutive = {e.src: e for e in edges if e.kind == "sequence"}  # scan k onto k-1
    steps = [consecutive[k] for k in range(1, len(names))]
    seg, poses = placed.segments, placed.poses
    relative = [
        np.linalg.inv(poses[k - 1]) @ poses[k] if seg[k] == seg[k - 1] else _BROKEN
        for k in range(1, len(names))
    ]
    models = [e.model for e in edges if e.model]
    loops = [e for e in edges if e.kind == "loop" and e.kept]
    logger.info("loop closure: %d of %d edges kept, %d loops closed, %d segments",
                sum(e.kept for e in edges), len(edges), len(loops), int(seg.max()) + 1)  # fmt: skip
    for k, why in sorted(placed.starts.items()):
        logger.info("%s: not placed with the scans before it: %s; segment %d starts there",
                    names[k], why, int(seg[k]))  # fmt: skip
    return OdometryResult(
        poses, np.stack(relative), np.array([e.time_s for e in steps]),
        max(set(models), key=models.count) if models else (options.model or "auto"),
        registered=np.array([e.registered for e in steps], bool),
        reasons=[e.reason if not e.registered else "" for e in steps],
        segment_of=seg, starts=placed.starts, edges=edges, neighbours=neighbours,
    )  # fmt: skip


def _serial(names, model, method, icp, voxel_size, device, progress, max_memory, nan_policy):
    from pcreg.api import pipeline
    from pcreg.io import read_points
    from pcreg.registration.resources import read_cap

    register = pipeline(
        model,
        method=method,
        icp=icp,
        voxel_size=voxel_size,
        device=device,
        max_memory=max_memory,
    )
    relative, times, used, reasons = [], [], model, []
    cap = read_cap(max_memory)
    previous = read_points(names[0], nan_policy=nan_policy, max_memory=cap)
    for k in tqdm(range(1, len(names)), desc="odometry", unit="scan", disable=not progress):
        current = read_points(names[k], nan_policy=nan_policy, max_memory=cap)
        result = register(current, previous, (names[k], names[k - 1]))
        used = result.model or used
        relative.append(result.transform if result.registered else _BROKEN)
        reasons.append(None if result.registered else (result.reason or "not registered"))
        times.append(result.time_s)
        previous = current
    return relative, times, used, reasons


def _on_ray(
    names, model, method, icp, voxel_size, workers, address, progress, max_memory, nan_policy
):
    import ray

    from pcreg.batch.manifest import ManifestPair
    from pcreg.batch.runner import BatchOptions, RayRunner
    from pcreg.engine.heap import retaining

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
    for row in ordered:
        if row["status"] != "ok":  # its error reads "<file>: <problem>" already
            source, _, problem = row["error"].partition(": ")
            raise InputError(source, problem or row["error"])
    relative = [
        np.asarray(r["transform"], np.float64) if r["registered"] else _BROKEN for r in ordered
    ]
    reasons = [None if r["registered"] else (r.get("reason") or "not registered") for r in ordered]
    return relative, [r["time_s"] for r in ordered], ordered[-1]["model"], reasons


def pose_record(
    frame: str,
    calib: str | os.PathLike[str] | None,
    scans: Sequence[str | os.PathLike[str]],
    result: OdometryResult | None = None,
) -> dict[str, object]:
    """What a poses file's sidecar JSON says: ``{"frame", "calib" (path or None),
    "convention", "scans", "segments", "breaks"}``: ``segments`` the segment of every scan
    and ``breaks`` where a segment starts (:meth:`OdometryResult.breaks`); without
    ``result``, one segment and no break. With loop closure also ``"loop_closure"``
    (:meth:`OdometryResult.loop_record`)."""
    record: dict[str, object] = {
        "frame": frame,
        "calib": None if calib is None else os.fspath(calib),
        "convention": CONVENTION if result is None or result.edges is None else CONVENTION_LOOP,
        "scans": [os.fspath(s) for s in scans],
        "segments": [0] * len(scans) if result is None else result.segments.tolist(),
        "breaks": [] if result is None else result.breaks(scans),
    }
    if result is not None and result.edges is not None:
        record["loop_closure"] = result.loop_record(scans)
    return record
