"""The one registration pipeline: ``(src, ref)`` -> :class:`RegistrationResult`.

Steps, in order:

1. **Validate and choose the setting** (no model needed): the clouds' extents pick ``indoor`` or
   ``outdoor`` when no model is named, clouds whose scales differ by more than 10x or that keep
   too few points at the working voxel are refused (:class:`~pcreg.errors.InputError`).
2. **Estimate**: the learned path (the network under the orientation search,
   :mod:`pcreg.registration.search`) or the classical one (Open3D FPFH + RANSAC).
3. **Refine** (optional): point-to-plane ICP.
4. **Result**: the transform, the correspondences it rests on, its confidence, which
   hypothesis won, and the time of each stage.

``pcreg.register``, the command line, ``pcreg evaluate``, odometry and the benchmarks all call
:class:`Registration`. Loading networks is left to a loader (``networks``): the public API
passes one that caches them per process, so changing the search settings between pipelines
reuses the loaded weights.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from pcreg.errors import InputError
from pcreg.registration.result import SETTINGS, RegistrationResult, Setting

if TYPE_CHECKING:  # torch and the network load only when a pipeline is built
    from pcreg.registration.loading import LoadedNetwork
    from pcreg.registration.network import Prediction
    from pcreg.registration.search import OrientationSearch

__all__ = [
    "MAX_SCALE_RATIO",
    "METHODS",
    "MIN_POINTS",
    "OUTDOOR_EXTENT_M",
    "Registration",
    "TooFewPointsError",
    "choose_model",
    "cloud_extent",
]

logger = logging.getLogger(__name__)

METHODS = ("geotransformer", "fpfh-ransac")
#: fewest points left after voxel downsampling that registration is attempted with
MIN_POINTS = 100
#: clouds whose robust extent (bounding-box diagonal, metres) exceeds this are "outdoor"
OUTDOOR_EXTENT_M = 20.0
#: extents differing by more than this factor mean different units or a wrong file
MAX_SCALE_RATIO = 10.0
#: a network whose voxel is at least this (metres) works at street scale (the shipped
#: ``outdoor`` model: 0.3 m; ``indoor``: 5 cm), for checkpoints that do not name their setting
_OUTDOOR_NETWORK_VOXEL = 0.1

NetworkLoader = Callable[[str, str], "LoadedNetwork"]


class TooFewPointsError(InputError):
    """Too few points (after voxel downsampling) to register."""


def cloud_extent(points: np.ndarray) -> float:
    """Diagonal (metres) of the 1st-99th percentile bounding box of ``points (N, 3)``: the
    size of the scene, ignoring a few stray returns."""
    lo, hi = np.percentile(points, [1, 99], axis=0)
    return float(np.linalg.norm(hi - lo))


def choose_model(src: np.ndarray, ref: np.ndarray) -> str:
    """``"outdoor"`` when either cloud spans more than :data:`OUTDOOR_EXTENT_M`, else
    ``"indoor"``: the shipped model (and setting) for a pair when none is named."""
    extent = max(cloud_extent(src), cloud_extent(ref))
    return "outdoor" if extent > OUTDOOR_EXTENT_M else "indoor"


def _voxel_count(points: np.ndarray, voxel: float) -> int:
    """Number of occupied ``voxel``-sized cells."""
    keys = np.floor((points - points.min(0)) / voxel).astype(np.int64)
    dims = keys.max(0) + 1
    if float(np.prod(dims.astype(np.float64))) < 2.0**62:
        # one int64 per cell: a 1-D sort, ~10x faster than np.unique(axis=0)'s row sort
        return len(np.unique(np.ravel_multi_index(keys.T, dims)))
    return len(np.unique(keys, axis=0))


@dataclass
class _Plan:
    """How one pair will be registered: its setting, the network (None: classical) and the
    voxel of FPFH + RANSAC / ICP."""

    setting: Setting
    model: str
    loaded: LoadedNetwork | None
    voxel: float


class Registration:
    """The registration pipeline, configured once and called on ``(src, ref)`` pairs.

    Args:
        model: ``"indoor"``, ``"outdoor"``, a checkpoint path, or None to choose per pair from
            the clouds' extent (> 20 m: outdoor). For ``fpfh-ransac`` it names the setting.
        method: ``"geotransformer"`` (the learned network) or ``"fpfh-ransac"``.
        icp: refine with point-to-plane ICP at the setting's voxel.
        voxel_size: FPFH + RANSAC and ICP voxel in metres (default: the setting's, 5 cm /
            0.3 m). The network always voxelises at the size it was trained with.
        device: ``"cpu"`` or ``"cuda"`` for the network.
        search: orientation-search settings replacing the network's defaults (a
            :class:`SearchConfig` field -> value mapping, e.g. ``{"orientation_keep": 0.0}``).
        networks: ``(model, device) -> LoadedNetwork``; default: :func:`load_network`, each
            network once per pipeline (:func:`pcreg.register` passes one shared by the process).

    Raises:
        InputError: an unknown method, a bad voxel size or search setting (at construction,
            before any model is loaded).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        method: str = "geotransformer",
        icp: bool = False,
        voxel_size: float | None = None,
        device: str = "cpu",
        search: dict[str, object] | None = None,
        networks: NetworkLoader | None = None,
    ) -> None:
        if method not in METHODS:
            raise InputError(
                "method", f"unknown method {method!r}; use one of {', '.join(METHODS)}"
            )
        if voxel_size is not None and not (np.isfinite(voxel_size) and voxel_size > 0):
            raise InputError("voxel_size", f"must be a positive number of metres, got {voxel_size}")
        from pcreg.registration.search import SearchConfig

        self.search_overrides = dict(search or {})
        try:
            replace(SearchConfig(), **self.search_overrides)
        except (TypeError, ValueError) as err:
            key = next(iter(self.search_overrides), "search")
            raise InputError(key, str(err).replace(f"{key} ", "", 1)) from None
        self.model = None if model is None else os.fspath(model)
        self.method = method
        self.icp = icp
        self.voxel_size = None if voxel_size is None else float(voxel_size)
        self.device = device
        self.networks = networks or _NetworkCache()

    # -- step 1: validation and the setting -------------------------------------------------

    def plan(
        self, src: np.ndarray, ref: np.ndarray, names: tuple[str, str] = ("src", "ref")
    ) -> _Plan:
        """Choose the setting and network for a pair and check that it can be registered.

        Raises:
            InputError: clouds whose scales differ by more than 10x, or too few points."""
        model = self.model
        if model is None:
            model = choose_model(src, ref)
            extent = max(cloud_extent(src), cloud_extent(ref))
            logger.info("model: %s (chosen from the clouds' extent, %.1f m)", model, extent)
        loaded = None
        if self.method == "geotransformer":
            loaded = self.networks(model, self.device)
            name = loaded.setting or (
                "outdoor"
                if loaded.network.config.voxel_size >= _OUTDOOR_NETWORK_VOXEL
                else "indoor"
            )
            check_voxel = loaded.network.config.voxel_size
        elif model in SETTINGS:
            name = model
        else:
            raise InputError(model, "fpfh-ransac takes model 'indoor' or 'outdoor' (its setting)")
        setting = SETTINGS[name]
        voxel = self.voxel_size if self.voxel_size is not None else setting.voxel_size
        _check_pair(src, ref, names, check_voxel if loaded is not None else voxel)
        return _Plan(setting, model, loaded, voxel)

    def loaded(self, model: str | None = None) -> LoadedNetwork:
        """The network this pipeline runs for ``model`` (default: its own model; loaded through
        its loader, so a cached loader returns the shared instance)."""
        name = model if model is not None else self.model
        if name is None:
            raise ValueError("this pipeline chooses its model per pair: name one")
        return self.networks(name, self.device)

    def search_for(self, loaded: LoadedNetwork) -> OrientationSearch:
        """The orientation search over a loaded network with this pipeline's settings."""
        from pcreg.registration.search import OrientationSearch

        config = replace(loaded.search, **self.search_overrides)
        return OrientationSearch.from_config(loaded.network, config)

    # -- steps 2-4 ---------------------------------------------------------------------------

    def __call__(
        self, src: np.ndarray, ref: np.ndarray, names: tuple[str, str] = ("src", "ref")
    ) -> RegistrationResult:
        """Register ``src (N, 3)`` onto ``ref (M, 3)`` (metres, validated arrays); ``names``
        label them in errors."""
        start = time.perf_counter()
        plan = self.plan(src, ref, names)
        t0 = time.perf_counter()
        if plan.loaded is not None:
            found = self.search_for(plan.loaded)(src, ref)
            result = self._learned(plan, found.prediction, found.hypothesis)
        else:
            result = self._classical(plan, src, ref)
        result.timings["register"] = time.perf_counter() - t0
        return self._finish(result, plan, src, ref, start)

    def batch(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[RegistrationResult]:
        """Register ``(src, ref)`` pairs in this process, results in input order. A network
        without orientation search runs all pairs in one padded forward pass (each
        ``timings["register"]`` is then the batch's). Over worker processes:
        :class:`~pcreg.batch.runner.RayRunner` (a floor up)."""
        plans = [self.plan(s, r) for s, r in pairs]
        loaded = plans[0].loaded if plans else None
        if (
            loaded is not None
            and all(p.loaded is loaded for p in plans)
            and self.search_for(loaded).plain
        ):
            start = time.perf_counter()
            preds = loaded.network.forward(list(pairs))
            elapsed = time.perf_counter() - start
            out = []
            for plan, pred, (src, ref) in zip(plans, preds, pairs, strict=True):
                result = self._learned(plan, pred, "identity")
                result.timings["register"] = elapsed
                out.append(self._finish(result, plan, src, ref, start))
            return out
        return [self(s, r) for s, r in pairs]

    def _learned(self, plan: _Plan, pred: Prediction, hypothesis: str) -> RegistrationResult:
        assert plan.loaded is not None
        radius = plan.loaded.network.config.acceptance_radius
        total = float(pred.corr_scores.sum())
        confidence = pred.consensus(radius) / total if total > 0 else 0.0
        return RegistrationResult(
            transform=pred.transform,
            src_corr_points=pred.src_corr_points,
            ref_corr_points=pred.ref_corr_points,
            corr_scores=pred.corr_scores,
            method="geotransformer",
            model=plan.model,
            setting=plan.setting.name,
            icp=False,
            voxel_size=plan.voxel,
            confidence=confidence,
            hypothesis=hypothesis,
        )

    def _classical(self, plan: _Plan, src: np.ndarray, ref: np.ndarray) -> RegistrationResult:
        from pcreg.baselines import fpfh_ransac

        res = fpfh_ransac(src, ref, plan.voxel)
        n = len(res.src_corr_points)
        return RegistrationResult(
            transform=res.transform,
            src_corr_points=res.src_corr_points,
            ref_corr_points=res.ref_corr_points,
            corr_scores=np.ones(n),
            method="fpfh-ransac",
            model=plan.model,
            setting=plan.setting.name,
            icp=False,
            voxel_size=plan.voxel,
            confidence=1.0 if n else 0.0,
        )

    def _finish(
        self,
        result: RegistrationResult,
        plan: _Plan,
        src: np.ndarray,
        ref: np.ndarray,
        start: float,
    ) -> RegistrationResult:
        """ICP when asked, then the arrays' dtypes and shapes and the total time."""
        if self.icp:
            from pcreg.baselines import icp_refine

            t0 = time.perf_counter()
            refined = icp_refine(src, ref, result.transform, plan.voxel)
            result.timings["icp"] = time.perf_counter() - t0
            result.transform = refined.transform
            result.src_corr_points = refined.src_corr_points
            result.ref_corr_points = refined.ref_corr_points
            result.corr_scores = np.ones(len(refined.src_corr_points))
            result.icp = True
        result.transform = np.asarray(result.transform, np.float64)
        result.src_corr_points = np.asarray(result.src_corr_points, np.float64).reshape(-1, 3)
        result.ref_corr_points = np.asarray(result.ref_corr_points, np.float64).reshape(-1, 3)
        result.corr_scores = np.asarray(result.corr_scores, np.float64).reshape(-1)
        result.timings["total"] = time.perf_counter() - start
        return result


class _NetworkCache:
    """The default loader: :func:`~pcreg.registration.loading.load_network`, each network read
    once per pipeline (a pipeline registers many pairs with the same weights)."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, str], LoadedNetwork] = {}

    def __call__(self, model: str, device: str) -> LoadedNetwork:
        from pcreg.registration.loading import load_network

        key = (model, device)
        if key not in self._loaded:
            self._loaded[key] = load_network(model, device)
        return self._loaded[key]


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
