"""``pcreg.register``: one call from two point clouds to ``T_ref_src``.

>>> import pcreg                                                     # doctest: +SKIP
>>> result = pcreg.register("src.ply", "ref.ply", model="indoor")    # doctest: +SKIP
>>> result.transform                  # (4, 4): maps source points into the reference frame

Inputs may be file paths (any format :func:`pcreg.io.read_points` reads), ``(N, 3)`` numpy
arrays, torch tensors or Open3D point clouds, in metres. Two methods: the learned network
(``"geotransformer"``, shipped weights or any checkpoint) and Open3D's FPFH + RANSAC
(``"fpfh-ransac"``); either may be refined by point-to-plane ICP.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pcreg.errors import InputError
from pcreg.io import read_points, validate_points

__all__ = [
    "METHODS",
    "MIN_POINTS",
    "RegistrationResult",
    "TooFewPointsError",
    "choose_model",
    "cloud_extent",
    "default_voxel_size",
    "register",
    "register_points",
]

logger = logging.getLogger(__name__)

METHODS = ("geotransformer", "fpfh-ransac")
#: fewest points left after voxel downsampling that registration is attempted with
MIN_POINTS = 100
#: clouds whose robust extent (bounding-box diagonal, metres) exceeds this are "outdoor"
OUTDOOR_EXTENT_M = 20.0
#: extents differing by more than this factor mean different units or a wrong file
MAX_SCALE_RATIO = 10.0
_VOXEL = {"indoor": 0.05, "outdoor": 0.3}  # FPFH + RANSAC and ICP (DESIGN §6 baselines)


class TooFewPointsError(InputError):
    """Too few points (after voxel downsampling) to register."""


@dataclass
class RegistrationResult:
    """What :func:`register` found.

    Attributes:
        transform: ``(4, 4) float64`` ``T_ref_src`` (``ref ≈ R @ src + t``).
        src_corr_points, ref_corr_points: ``(K, 3) float64`` the correspondences the estimate
            rests on (source / reference frame, metres): the network's dense matches, RANSAC's
            inliers, or ICP's final nearest neighbors when ``icp`` refined the result.
        corr_scores: ``(K,) float64`` confidence of each correspondence (1.0 for classical ones).
        method: ``"geotransformer"`` or ``"fpfh-ransac"``; ``model``: the weights used (name or
            path) or the setting name (``"indoor"`` / ``"outdoor"``) for the classical method;
            ``setting``: ``"indoor"`` or ``"outdoor"`` (from the model's voxel size).
        icp: whether point-to-plane ICP refined the result; ``voxel_size``: the voxel (metres)
            of FPFH + RANSAC and ICP.
        timings: seconds per stage (``load``, ``register``, ``icp``) and ``total``.
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
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def num_correspondences(self) -> int:
        return len(self.src_corr_points)

    @property
    def time_s(self) -> float:
        return float(self.timings.get("total", sum(self.timings.values())))

    def errors(self, gt_transform: np.ndarray, src_points: np.ndarray | None = None) -> dict:
        """RRE (deg), RTE (m), inlier ratio of the correspondences under the truth (radius
        0.1 m indoors / 0.6 m outdoors, the benchmarks' settings), and with ``src_points`` the
        RMSE (m) between the source moved by the estimate and by the truth."""
        import torch

        from pcreg.geometry import inlier_ratio, pose_errors

        out = pose_errors(self.transform, np.asarray(gt_transform), src_points)
        out["inlier_ratio"] = (
            float(
                inlier_ratio(
                    torch.from_numpy(self.src_corr_points),
                    torch.from_numpy(self.ref_corr_points),
                    torch.from_numpy(np.asarray(gt_transform, np.float64)),
                    radius=0.6 if self.setting == "outdoor" else 0.1,
                )
            )
            if self.num_correspondences
            else 0.0
        )
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the ``pcreg register --json`` keys, without ground truth)."""
        return {
            "transform": self.transform.tolist(),
            "method": self.method,
            "model": self.model,
            "setting": self.setting,
            "icp": self.icp,
            "voxel_size_m": self.voxel_size,
            "num_correspondences": self.num_correspondences,
            "time_s": self.time_s,
            "timings": dict(self.timings),
        }


def as_points(cloud: Any, name: str) -> np.ndarray:
    """``(N, 3) float32`` from a path, array, tensor or Open3D cloud; errors name ``name``
    (or the file)."""
    if isinstance(cloud, (str, os.PathLike)):
        return read_points(cloud)
    if type(cloud).__module__.startswith("torch"):  # a tensor (torch imported lazily)
        return validate_points(cloud.detach().cpu().numpy(), name)
    if hasattr(cloud, "points") and not isinstance(cloud, np.ndarray):  # open3d PointCloud
        return validate_points(np.asarray(cloud.points), name)
    return validate_points(cloud, name)


def cloud_extent(points: np.ndarray) -> float:
    """Diagonal (metres) of the 1st-99th percentile bounding box of ``points (N, 3)``: the
    size of the scene, ignoring a few stray returns."""
    lo, hi = np.percentile(points, [1, 99], axis=0)
    return float(np.linalg.norm(hi - lo))


def choose_model(src: np.ndarray, ref: np.ndarray) -> str:
    """``"outdoor"`` when either cloud spans more than 20 m, else ``"indoor"``."""
    extent = max(cloud_extent(src), cloud_extent(ref))
    return "outdoor" if extent > OUTDOOR_EXTENT_M else "indoor"


def default_voxel_size(setting: str) -> float:
    """FPFH + RANSAC / ICP voxel for ``"indoor"`` (5 cm) or ``"outdoor"`` (0.3 m)."""
    return _VOXEL.get(setting, _VOXEL["indoor"])


def _voxel_count(points: np.ndarray, voxel: float) -> int:
    """Number of occupied ``voxel``-sized cells."""
    keys = np.floor((points - points.min(0)) / voxel).astype(np.int64)
    dims = keys.max(0) + 1
    if float(np.prod(dims.astype(np.float64))) < 2.0**62:
        # one int64 per cell: a 1-D sort, ~10x faster than np.unique(axis=0)'s row sort
        return len(np.unique(np.ravel_multi_index(keys.T, dims)))
    return len(np.unique(keys, axis=0))


def _check_pair(src: np.ndarray, ref: np.ndarray, names: tuple[str, str], voxel: float) -> None:
    extents = [cloud_extent(src), cloud_extent(ref)]
    small, large = sorted(extents)
    if small <= 0 or large / small > MAX_SCALE_RATIO:
        raise InputError(
            f"{names[0]} / {names[1]}",
            f"the clouds span {extents[0]:.3g} m and {extents[1]:.3g} m: scales differ by more "
            f"than {MAX_SCALE_RATIO:g}x (different units, e.g. millimetres vs metres?)",
        )
    for pts, name in zip((src, ref), names, strict=True):
        n = _voxel_count(pts, voxel)
        if n < MIN_POINTS:
            raise TooFewPointsError(
                name,
                f"only {n} points after {voxel:g} m voxel downsampling ({len(pts)} given); "
                f"at least {MIN_POINTS} are needed to register",
            )


def _cached_model(model: str, device: str, orientation_keep: float | None = None):
    """The loaded model for these arguments, shared by every caller in the process (the
    benchmarks time stages on the very instance ``register`` runs). The cache key is always
    the full positional triple, however the caller spells the call."""
    return _load_model_cached(model, device, orientation_keep)


@functools.lru_cache(maxsize=4)
def _load_model_cached(model: str, device: str, orientation_keep: float | None):
    from pcreg.weights import load_model

    if orientation_keep is None:
        return load_model(model, device=device)
    return load_model(model, device=device, orientation_keep=orientation_keep)


def register(
    src: Any,
    ref: Any,
    model: str | os.PathLike[str] | None = None,
    *,
    method: str = "geotransformer",
    icp: bool = False,
    voxel_size: float | None = None,
    device: str = "cpu",
    orientation_keep: float | None = None,
) -> RegistrationResult:
    """Estimate ``T_ref_src`` that moves ``src`` onto ``ref``.

    Args:
        src, ref: paths, ``(N, 3)`` arrays / tensors (metres), or Open3D point clouds.
        model: ``"indoor"``, ``"outdoor"``, a checkpoint path, or None to choose from the
            clouds' extent (> 20 m: outdoor). For ``fpfh-ransac`` it picks the voxel default.
        method: ``"geotransformer"`` (the learned network) or ``"fpfh-ransac"``.
        icp: refine with point-to-plane ICP at ``voxel_size``.
        voxel_size: FPFH + RANSAC and ICP voxel in metres (default 5 cm indoor, 0.3 m
            outdoor). The network always voxelizes at the size it was trained with.
        device: ``"cpu"`` or ``"cuda"`` for the network.
        orientation_keep: for a model with the Manhattan orientation search (``indoor``), run
            the cube hypotheses ranked within this fraction of the best (0 to 1; 0 runs all
            24: slower, occasionally a pair more at low overlap). None keeps the model's
            setting (0.7 for ``indoor``). Ignored by models without the search.

    Raises:
        InputError: unreadable / empty / non-finite input, too few points, clouds whose scales
            differ by more than 10x, an unknown method or model.
    """
    start = time.perf_counter()
    names = (
        os.fspath(src) if isinstance(src, (str, os.PathLike)) else "src",
        os.fspath(ref) if isinstance(ref, (str, os.PathLike)) else "ref",
    )
    src_pts, ref_pts = as_points(src, names[0]), as_points(ref, names[1])
    result = register_points(
        src_pts,
        ref_pts,
        model,
        method=method,
        icp=icp,
        voxel_size=voxel_size,
        device=device,
        names=names,
        orientation_keep=orientation_keep,
    )
    result.timings["load"] = time.perf_counter() - start - result.timings["total"]
    result.timings["total"] = time.perf_counter() - start
    return result


def register_points(
    src_pts: np.ndarray,
    ref_pts: np.ndarray,
    model: str | os.PathLike[str] | None = None,
    *,
    method: str = "geotransformer",
    icp: bool = False,
    voxel_size: float | None = None,
    device: str = "cpu",
    names: tuple[str, str] = ("src", "ref"),
    orientation_keep: float | None = None,
) -> RegistrationResult:
    """:func:`register` on validated ``(N, 3)`` arrays; ``names`` label them in errors."""
    start = time.perf_counter()
    if method not in METHODS:
        raise InputError("method", f"unknown method {method!r}; use one of {', '.join(METHODS)}")
    if orientation_keep is not None:
        orientation_keep = float(orientation_keep)
        if not 0.0 <= orientation_keep <= 1.0:
            raise InputError(
                "orientation_keep", f"must lie between 0 and 1, got {orientation_keep:g}"
            )
    timings: dict[str, float] = {}
    if model is None:
        model = choose_model(src_pts, ref_pts)
        logger.info(
            "model: %s (chosen from the clouds' extent, %.1f m)",
            model,
            max(cloud_extent(src_pts), cloud_extent(ref_pts)),
        )
    model = os.fspath(model)
    registrar = None
    if method == "geotransformer":
        registrar = _cached_model(model, device, orientation_keep)
        setting = "outdoor" if registrar.config.voxel_size >= 0.1 else "indoor"
        check_voxel = registrar.config.voxel_size
    else:
        if model not in _VOXEL:
            raise InputError(model, "fpfh-ransac takes model 'indoor' or 'outdoor' (its setting)")
        setting = model
    voxel = float(voxel_size) if voxel_size is not None else default_voxel_size(setting)
    if voxel <= 0 or not np.isfinite(voxel):
        raise InputError("voxel_size", f"must be a positive number of metres, got {voxel_size}")
    _check_pair(src_pts, ref_pts, names, check_voxel if registrar is not None else voxel)

    t0 = time.perf_counter()
    if registrar is not None:
        pred = registrar(ref_pts, src_pts)
        transform, src_c, ref_c, scores = (
            pred.transform,
            pred.src_corr_points,
            pred.ref_corr_points,
            pred.corr_scores,
        )
    else:
        from pcreg.baselines import fpfh_ransac

        res = fpfh_ransac(src_pts, ref_pts, voxel)
        transform, src_c, ref_c = res.transform, res.src_corr_points, res.ref_corr_points
        scores = np.ones(len(src_c))
    timings["register"] = time.perf_counter() - t0
    if icp:
        from pcreg.baselines import icp_refine

        t0 = time.perf_counter()
        refined = icp_refine(src_pts, ref_pts, transform, voxel)
        timings["icp"] = time.perf_counter() - t0
        transform, src_c, ref_c = (
            refined.transform,
            refined.src_corr_points,
            refined.ref_corr_points,
        )
        scores = np.ones(len(src_c))
    timings["total"] = time.perf_counter() - start
    return RegistrationResult(
        transform=np.asarray(transform, np.float64),
        src_corr_points=np.asarray(src_c, np.float64).reshape(-1, 3),
        ref_corr_points=np.asarray(ref_c, np.float64).reshape(-1, 3),
        corr_scores=np.asarray(scores, np.float64).reshape(-1),
        method=method,
        model=model,
        setting=setting,
        icp=icp,
        voxel_size=voxel,
        timings=timings,
    )
