"""What a registration returns, and the two scan settings the defaults depend on."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pcreg.registration.verdict import Verdict
    from pcreg.registration.verify import Verification

__all__ = ["OUTDOOR_EXTENT_M", "SETTINGS", "RegistrationResult", "Setting"]


@dataclass(frozen=True)
class Setting:
    """Defaults of a kind of scan.

    name: ``"indoor"`` (RGB-D fragments, 3DMatch-like) or ``"outdoor"`` (LiDAR, KITTI-like).
    voxel_size: FPFH + RANSAC and ICP voxel in metres (DESIGN §6: 5 cm / 0.3 m).
    inlier_radius: the protocol's inlier-ratio radius in metres (DESIGN §7: 3DMatch 0.1 m,
        KITTI 0.6 m); the correspondence colours of the pictures use it too.
    superpoint_cap: about how many superpoint cells of each cloud the network is given,
        those nearest its centre (:meth:`~pcreg.registration.pipeline._Plan.for_network`,
        :func:`~pcreg.registration.cleaning.nearest_cells`); None: all. The rest of the
        pipeline works on the whole clouds. The geometric transformer's work grows with the
        square of the superpoints. KITTI scans have 210-760 at the outdoor network's 4.8 m
        (seq. 00-07 of ``../shared/train_data``; the highway scans of 01 and 04 600-760), and
        one network pass took 2.9 s at 700, 1.65 s at 400. On the 52 training pairs of
        ``../shared/train_data`` the default ``auto`` registered 52/52 right with every
        superpoint and with 400 (median 2.31 / 2.19 s); the learned path alone 52/52 and
        51/52 (one highway pair 8.9 m apart refused, which ``auto`` registers through FPFH +
        RANSAC); 500 registered one pair 0.87 m off (2-core AMD EPYC). Indoor: none measured
        (a 3DMatch fragment has 100-400 at 0.4 m; a whole scanned room more, and cutting each
        of two stations' scans to its own centre could cut away their overlap).
    superpoint_budget: about how many superpoint cells of each cloud the network is given,
        the pair scaled down until neither has more (:func:`~pcreg.registration.cleaning.
        budget_scale`; the network's answer scaled back); None: as it is. Unlike the cap
        above it keeps the whole scene: two stations of a room scanner overlap anywhere.
        The rest of the pipeline (FPFH + RANSAC, ICP, the verification) works on the pair
        as read. BENCHMARKS.md, "Whole scanned rooms", has the measurements.
    classical_queries: ``auto``'s FPFH + RANSAC matches at most this many downsampled
        source points (a seeded subset, each with its whole-cloud feature: its time goes
        into matching them, :func:`~pcreg.baselines.fpfh_ransac.fpfh_ransac`); None: all.
        ``--method fpfh-ransac`` (Open3D's recipe, the benchmarks' peer) always matches
        all. On the 52 KITTI training pairs of ``../shared/train_data`` (0.3 m voxel: 10-34k
        points) RANSAC found the pose (under 5 deg / 2 m) for 49 with every point, 48 with
        10,000 and 49 with 6,000, in a median 2.65 / 1.59 / 1.27 s (2-core AMD EPYC, busy).
        Indoor: none. Generated room fragments (under 6,000 points at 5 cm) would not be cut;
        on the denser generated room of the suite (15.7k points at 5 cm) RANSAC's pose was
        6.2 deg off with every point and 6.0-12.3 deg with 5,000-6,000: not measured enough
        to cap.
    """

    name: str
    voxel_size: float
    inlier_radius: float
    superpoint_cap: int | None = None
    superpoint_budget: int | None = None
    classical_queries: int | None = None


#: clouds whose robust extent (bounding-box diagonal, metres) exceeds this are "outdoor"
OUTDOOR_EXTENT_M = 20.0
#: the settings by name
SETTINGS = {
    "indoor": Setting("indoor", voxel_size=0.05, inlier_radius=0.1, superpoint_budget=500),
    "outdoor": Setting(
        "outdoor", voxel_size=0.3, inlier_radius=0.6, superpoint_cap=400, classical_queries=6000
    ),
}


@dataclass
class RegistrationResult:
    """What the registration pipeline found for one pair.

    Attributes:
        transform: ``(4, 4) float64`` ``T_ref_src`` (``ref ≈ R @ src + t``).
        src_corr_points, ref_corr_points: ``(K, 3) float64`` the correspondences the estimate
            rests on (source / reference frame, metres): the network's dense matches, RANSAC's
            inliers, or ICP's final nearest neighbors when ``icp`` refined the result.
        corr_scores: ``(K,) float64`` confidence of each correspondence (1.0 for classical ones).
        method: ``"geotransformer"`` or ``"fpfh-ransac"``; ``model``: the weights used (name or
            path) or the setting name for the classical method; ``setting``: ``"indoor"`` or
            ``"outdoor"``.
        icp: whether point-to-plane ICP refined the result; ``voxel_size``: the voxel (metres)
            of FPFH + RANSAC and ICP.
        confidence: how distinctive the fit at the estimate is, 0-1: the verifier's contrast
            (:mod:`pcreg.registration.verify`; about 0.4 for correct estimates of real rooms
            and streets, about 0 for chance fits; registered from
            :data:`~pcreg.registration.verify.REGISTERED_CONTRAST` on).
        fitness: the share of the (voxelised) source with a reference point within 1.5
            voxels at the estimate: the overlap the estimate finds (0-1).
        method_used: what produced the estimate under ``method="auto"``:
            ``"geotransformer"`` (the network and its orientation search), ``"fpfh-ransac"``
            (the classical pipeline), or ``"fpfh-ransac+geotransformer"`` (the network run
            from the classical estimate), ``"object-in-scene"`` (a cloud 10-50x smaller than
            the other searched inside it, :mod:`pcreg.registration.inside`); otherwise the
            method itself (set at construction when not given).
        units, object, scale: the unit the input was read in (``"metres"``,
            ``"millimetres"``, ``"centimetres"``), whether it was registered as an object
            scaled up for the network, and the factor the clouds were multiplied by for the
            network (:mod:`pcreg.registration.scale`); the transform, points and
            ``voxel_size`` are in the input's units, and :meth:`errors` and the ``_m`` keys of
            :meth:`to_dict` in metres (converted by :attr:`metres_per_unit`).
        rejected: why an estimate the verifier accepted is still not registered (``--strict``:
            the other path registered a different transform).
        hypothesis: the orientation hypothesis that won (``"identity"``, ``"cube 5"``, ...;
            ``""`` for the classical method).
        timings: seconds per stage (``register``, ``icp``, ``verify`` of the answer's own
            estimate) and ``total``; ``method="auto"`` adds ``search`` and ``checks``, and
            :func:`pcreg.register` ``load``: ``load`` + ``search`` + ``checks`` = ``total``.
    """

    transform: np.ndarray
    src_corr_points: np.ndarray
    ref_corr_points: np.ndarray
    corr_scores: np.ndarray
    method: str
    model: str
    setting: str
    icp: bool
    voxel_size: float
    confidence: float = 0.0
    hypothesis: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    fitness: float = 0.0
    verification: Verification | None = field(default=None, repr=False)
    method_used: str = ""
    units: str = "metres"
    scale: float = 1.0
    object: bool = False
    rejected: str = ""
    verdict: Verdict | None = field(default=None, repr=False)
    readings: list[dict[str, Any]] = field(default_factory=list)
    #: invalid points (NaN/Inf, or marked invalid by a file's format) dropped from the source
    #: and the reference, files and arrays alike
    dropped_invalid: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        if not self.method_used:  # one method alone: it is what produced the estimate
            self.method_used = self.method

    @property
    def num_correspondences(self) -> int:
        return len(self.src_corr_points)

    @property
    def time_s(self) -> float:
        return float(self.timings.get("total", sum(self.timings.values())))

    @property
    def registered(self) -> bool:
        """Whether the estimate is a registration: it rests on at least 3 correspondences
        (the fewest a rigid transform needs), and the verifier finds a distinctive fit at it
        (:func:`~pcreg.registration.verify.verify`: enough source points fit, and the fit
        drops when the source is moved a few radii away; the threshold was measured on
        validation pairs, see ``BENCHMARKS.md``)."""
        return not self.reason

    @property
    def reason(self) -> str:
        """Why the result is not registered, in words (``""`` when it is)."""
        n = self.num_correspondences
        if n == 0:
            if np.allclose(self.transform, np.eye(4)):
                return "no correspondences: the estimate (the identity) rests on nothing"
            # a search's answer at which nothing lies near: say so, not "the identity"
            return (
                "no correspondences: no point of the source lies near the reference at the estimate"
            )
        if n < 3:
            return f"only {n} correspondences; a rigid transform needs at least 3"
        if self.rejected:
            return self.rejected
        if self.verdict is not None:
            return self.verdict.reason
        if self.verification is not None:
            return self.verification.reason
        if not self.confidence > 0.0:
            return "no correspondence agrees with the estimate (confidence 0)"
        return ""

    @property
    def metres_per_unit(self) -> float:
        """Metres per input unit under the reading of :attr:`units` (0.001 for millimetres)."""
        from pcreg.registration.scale import METRES_PER_UNIT

        return METRES_PER_UNIT.get(self.units, 1.0)

    @property
    def inlier_radius(self) -> float:
        """The protocol's inlier radius of this result's setting, in the input's units
        (metres, divided by :attr:`scale`)."""
        return SETTINGS[self.setting].inlier_radius / self.scale

    def errors(
        self, gt_transform: np.ndarray | str | os.PathLike[str], src_points: Any = None
    ) -> dict:
        """RRE (deg), RTE (metres), the inlier ratio of the correspondences under the truth
        (within :attr:`inlier_radius`), and with ``src_points`` the RMSE (metres) between the
        source moved by the estimate and by the truth. ``gt_transform`` and ``src_points`` are
        in the input's units; ``rte_m`` and ``rmse_m`` are converted to metres by the unit the
        input was read in (:attr:`units`: a bunny in millimetres with a 0.87 mm error gives
        ``rte_m`` 0.00087). ``rte_m`` is the benchmarks' RTE, the error at the coordinates'
        origin: for georeferenced clouds, far from it, it grows with the rotation error
        (998 m for a right pair 0.1 deg off, 500 km from the origin); with ``src_points``,
        ``centre_error_m`` is the error where the source lies (its centroid's displacement
        between the two poses, metres). ``gt_transform``: a rigid ``(4, 4)`` array, or a file
        as ``pcreg register --gt`` reads it; a scaled or mirrored matrix is refused
        (:class:`~pcreg.errors.NonRigidTransformError`)."""
        from pcreg.errors import InputError
        from pcreg.geometry.lean_metrics import pose_errors_np
        from pcreg.registration.inputs import as_points

        if src_points is not None:  # what register takes: a path, an array, a tensor, ...
            src_points = as_points(src_points, "src_points")
        if isinstance(gt_transform, (str, os.PathLike)):  # a file, as `pcreg register --gt`
            from pcreg.io import read_transform

            gt = read_transform(gt_transform)
        else:
            gt = np.asarray(gt_transform, np.float64)
            if gt.shape != (4, 4) or not np.isfinite(gt).all():
                raise InputError("gt_transform", f"must be a finite (4, 4) T_ref_src, got "
                                 f"shape {gt.shape}")  # fmt: skip
            from pcreg.io_formats.transform import validate_transform

            gt = validate_transform(gt, "gt_transform")  # rigid, as --gt: no scale, no mirror
        out = pose_errors_np(self.transform, gt, src_points)  # numpy: no torch to import
        if src_points is not None and len(src_points):  # the verdict's own pose distance
            from pcreg.registration.verdict import pose_distance

            est = np.asarray(self.transform, np.float64)
            out["centre_error_m"] = pose_distance(est, gt, src_points.mean(axis=0))[1]
        for key in ("rte_m", "rmse_m", "centre_error_m"):
            if out.get(key) is not None:
                out[key] = float(out[key]) * self.metres_per_unit
        out["inlier_ratio"] = 0.0
        if self.num_correspondences:
            moved = self.src_corr_points @ gt[:3, :3].T + gt[:3, 3]
            dist = np.linalg.norm(moved - self.ref_corr_points, axis=1)
            out["inlier_ratio"] = float(np.mean(dist < self.inlier_radius))
        return out

    def against(
        self, gt_transform: np.ndarray, src_points: np.ndarray, ref_points: np.ndarray
    ) -> dict[str, Any]:
        """:meth:`errors` against ``gt_transform (4, 4)`` and whether they keep the promise of
        ``registered`` (``right``, and ``right_criterion``: each condition with its value;
        :func:`~pcreg.registration.promise.against_truth`), from the source ``(N, 3)`` and
        reference ``(M, 3)`` in the input's units (anything :func:`pcreg.register` takes: paths,
        arrays, tensors, Open3D clouds): what ``pcreg register --gt --json`` adds."""
        from pcreg.registration.inputs import as_points
        from pcreg.registration.promise import against_truth

        src, ref = as_points(src_points, "src_points"), as_points(ref_points, "ref_points")
        errors = self.errors(gt_transform, src)
        return {**errors, **against_truth(self, np.asarray(gt_transform, np.float64), errors,
                                          src, ref)}  # fmt: skip

    def uncertainty(self, src_points: np.ndarray, ref_points: np.ndarray) -> dict[str, Any]:
        """The estimate's 6x6 ``information`` and calibrated ``covariance`` (rotation in
        radians, then translation in the input's units, a motion of the source frame; see
        ``covariance_convention`` and :mod:`pcreg.registration.information`), from the source
        ``(N, 3)`` and reference ``(M, 3)`` points it was registered from (input units). The
        keys ``pcreg register --json`` reports; calibrated per kind (an object, else the
        setting) on generated pairs and real KITTI training sweeps (BENCHMARKS.md, "Pose
        covariance coverage")."""
        from pcreg.registration.information import pose_uncertainty
        from pcreg.registration.inputs import as_points

        kind = "object" if self.object else self.setting
        src, ref = as_points(src_points, "src_points"), as_points(ref_points, "ref_points")
        out = pose_uncertainty(src, ref, self.transform, self.voxel_size, kind)
        if self.method_used == "object-in-scene":  # not among the calibration pairs
            out["covariance_convention"] += "; not measured on objects in scenes"
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the ``pcreg register --json`` keys, without ground truth):
        ``transform`` in the input's units (``units``), keys ending in ``_m`` in metres."""
        return {
            "registered": self.registered,
            "reason": self.reason,
            "transform": self.transform.tolist(),
            "method": self.method,
            "method_used": self.method_used or self.method,
            "units": self.units,
            "object": self.object,
            "scale": self.scale,
            "model": self.model,
            "setting": self.setting,
            "icp": self.icp,
            "voxel_size_m": self.voxel_size * self.metres_per_unit,
            "num_correspondences": self.num_correspondences,
            "confidence": self.confidence,
            "fitness": self.fitness,
            "agreement": None if self.verification is None else self.verification.agreement,
            "hypothesis": self.hypothesis,
            "score": None if self.verdict is None else self.verdict.to_dict()["score"],
            "ambiguous_with": (
                None
                if self.verdict is None or self.verdict.rival_transform is None
                else np.asarray(self.verdict.rival_transform).tolist()
            ),
            "mirror": None if self.verdict is None else self.verdict.mirror,
            "readings": list(self.readings),
            "dropped_invalid": list(self.dropped_invalid),
            "estimates": [] if self.verdict is None else self.verdict.to_dict()["candidates"],
            "time_s": self.time_s,
            "timings": dict(self.timings),
        }
