"""The orientation search: rotation hypotheses from pluggable sources, verified by the network.

A network trained on small rotations registers a pair under any rotation when it is shown the
pair under the right rotation hypothesis. A *hypothesis source* looks at a pair and proposes a
few: it returns a :class:`Hypotheses` (a frame for each cloud plus rotations of the source in
those frames), or None when it does not apply to the scene (and then contributes nothing,
rather than an arbitrary axis). :class:`OrientationSearch` runs the network on every proposed
hypothesis and keeps the best-supported estimate: the confidence-weighted count of its
correspondences within the acceptance radius, the quantity local-to-global registration itself
maximises (GeoTransformer §3.5).

Sources here:

* :class:`IdentityHypotheses`: the pair as given (already roughly aligned inputs: odometry,
  models trained on any rotation, such as the rotation-invariant ``outdoor`` weights).
* :class:`ManhattanHypotheses`: each cloud rotated into its Manhattan frame
  (:mod:`pcreg.geometry.manhattan`), leaving the pair one of the 24 cube rotations apart; the 24
  are ranked without the network by an FFT occupancy correlation
  (:mod:`pcreg.geometry.cube_ranking`) and only those within ``keep`` x the best are run.

The settings live in :class:`SearchConfig`, an inference configuration apart from the network's
architecture: changing them never rebuilds or reloads the network.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Protocol

import numpy as np

from pcreg.config import ORIENTATION_SEARCHES, SearchConfig
from pcreg.engine.threads import single_threaded_blas
from pcreg.geometry.cube_ranking import cube_hypothesis_scores
from pcreg.geometry.manhattan import CUBE_ROTATIONS, TooFewNormals, estimate_manhattan_frame
from pcreg.registration.mirror import MIRROR_RANK_RATIO, REFLECTION, mirrored
from pcreg.registration.prediction import Prediction

if TYPE_CHECKING:
    from pcreg.registration.network import Registrar
    from pcreg.registration.onnx_network import OnnxRegistrar

__all__ = [
    "ORIENTATION_SEARCHES",
    "Hypotheses",
    "HypothesisSource",
    "IdentityHypotheses",
    "ManhattanHypotheses",
    "OrientationSearch",
    "SearchConfig",
    "SearchResult",
]

logger = logging.getLogger(__name__)


@dataclass
class Hypotheses:
    """What a source proposes for one pair: rotate the source by ``src_frame`` and the
    reference by ``ref_frame`` (each ``(3, 3)``), then try each of ``rotations (H, 3, 3)`` on
    the source. ``labels``: one name per rotation (for the log and the result)."""

    src_frame: np.ndarray
    ref_frame: np.ndarray
    rotations: np.ndarray
    labels: list[str] = field(default_factory=list)
    #: ``rank_mirror(k)``: the ``k`` best rotations ``(k, 3, 3)`` for the source's mirror
    #: image in the source frame (the source as the search sees it, reflected in its first
    #: axis: ``src_frame`` rows with the first negated), none ``(0, 3, 3)`` where the mirror
    #: image ranks under :data:`~pcreg.registration.mirror.MIRROR_RANK_RATIO` x the source's
    #: best (a search that ranks nothing, ``keep=0``, does not screen: the mirror image is
    #: always estimated); None: the identity alone
    rank_mirror: Callable[[int], np.ndarray] | None = None


class HypothesisSource(Protocol):
    """Proposes rotation hypotheses for a pair, or None when it does not apply to it."""

    name: str

    def propose(self, src: np.ndarray, ref: np.ndarray) -> Hypotheses | None: ...


class IdentityHypotheses:
    """The pair as given: one hypothesis, no rotation."""

    name = "identity"

    def propose(self, src: np.ndarray, ref: np.ndarray) -> Hypotheses:
        eye = np.eye(3)
        return Hypotheses(eye, eye, eye[None], ["identity"])


class ManhattanHypotheses:
    """Cube rotations between the two clouds' Manhattan frames, ranked before the network.

    Args:
        frame_voxel: voxel (metres) of the frames' normal estimation (the voxel the training
            pairs were canonicalised with: ``max(0.05, network voxel)``).
        keep: run the cube rotations scoring at least ``keep`` x the best, best first (0: all
            24 in order).
        rank_voxel: grid cell (metres) of the ranking.
        min_support: the source does not apply to a pair unless one of its frames' axes hold
            at least this share of the normals (summed over the three axes): 500 random points
            of a 3DMatch scan hold 0.2 (too sparse for their normals), and the cube
            hypotheses still register them onto the full scan.
    """

    name = "manhattan"

    #: measured: real 3DMatch fragments 0.40-0.48, generated rooms 0.78-1.0 (the demo's
    #: pair 0.73 / 0.78); uniform noise (a 3 m box of 6,000 or 50,000 points) 0.03 / 0.05 and
    #: a Gaussian blob of 20,000 points 0.03, where Open3D's placeholder normal of a voxel
    #: without neighbours, counted as a normal, had made 0.52 and 0.37; the Stanford bunny
    #: and dragon range scans 0.07 and 0.11 (the bunny's mesh at 4 m 0.10)
    MIN_SUPPORT = 0.3

    def __init__(
        self,
        frame_voxel: float,
        keep: float = 0.7,
        rank_voxel: float = 0.2,
        min_support: float = MIN_SUPPORT,
    ) -> None:
        self.frame_voxel = frame_voxel
        self.keep = keep
        self.rank_voxel = rank_voxel
        self.min_support = min_support

    @single_threaded_blas
    def propose(self, src: np.ndarray, ref: np.ndarray) -> Hypotheses | None:
        try:
            f_src = estimate_manhattan_frame(src, voxel=self.frame_voxel)
            f_ref = estimate_manhattan_frame(ref, voxel=self.frame_voxel)
        except TooFewNormals as err:  # points too far apart at the frame's voxel
            logger.info("orientation search: no Manhattan frame (%s)", err)
            return None
        strongest = max(float(f_src.support.sum()), float(f_ref.support.sum()))
        if strongest < self.min_support:  # one Manhattan room is enough to try
            logger.info(
                "orientation search: no Manhattan frame (axes hold %.0f%% of the normals, "
                "under %.0f%%)", 100 * strongest, 100 * self.min_support,
            )  # fmt: skip
            return None
        src_rot, ref_rot = f_src.rotation, f_ref.rotation
        candidates = np.arange(len(CUBE_ROTATIONS))
        best = None  # the source's best rank: the mirror image must reach a share of it
        if self.keep > 0:
            rank = cube_hypothesis_scores(
                f_src.points @ src_rot.T,
                f_src.normals @ src_rot.T,
                f_ref.points @ ref_rot.T,
                f_ref.normals @ ref_rot.T,
                voxel=self.rank_voxel,
            )
            candidates = np.argsort(-rank, kind="stable")
            candidates = candidates[rank[candidates] >= self.keep * rank.max()]
            best = float(rank.max())

        def rank_mirror(k: int) -> np.ndarray:
            rank = cube_hypothesis_scores(  # the canonical source reflected in x
                mirrored(f_src.points @ src_rot.T),
                mirrored(f_src.normals @ src_rot.T),
                f_ref.points @ ref_rot.T,
                f_ref.normals @ ref_rot.T,
                voxel=self.rank_voxel,
            )
            if best is not None:
                screened = rank.max() < MIRROR_RANK_RATIO * best
                logger.info(
                    "mirror check: the mirror image ranks %.2f, the source %.2f (%.2fx)%s",
                    rank.max(), best, rank.max() / max(best, 1e-12),
                    ": not searched" if screened else "",
                )  # fmt: skip
                if screened:
                    return CUBE_ROTATIONS[:0]
            return CUBE_ROTATIONS[np.argsort(-rank, kind="stable")[:k]]

        return Hypotheses(
            src_rot, ref_rot, CUBE_ROTATIONS[candidates], [f"cube {int(i)}" for i in candidates],
            rank_mirror,
        )  # fmt: skip


@dataclass
class SearchResult:
    """The winning estimate (for the pair as given), its support (confidence-weighted
    correspondences within the acceptance radius), which hypothesis won, and how many ran."""

    prediction: Prediction
    support: float
    hypothesis: str
    tried: int
    #: every hypothesis's estimate ``(4, 4)`` (for the pair as given) and its support, the
    #: winner's included: how well the best *different* pose is supported
    alternatives: list[tuple[np.ndarray, float]] = field(default_factory=list)
    #: ``mirror(k)``: the network's best-supported estimate for the source's mirror image
    #: (:func:`~pcreg.registration.mirror.mirrored`) onto the reference under the ``k``
    #: best-ranked orientation hypotheses, its transform for the mirror image as given,
    #: reusing the search's pyramids and reference features where the network allows; it
    #: returns None where the ranking leaves the mirror image nothing to run
    mirror: Callable[[int], Prediction | None] | None = None

    def scaled(self, factor: float) -> SearchResult:
        """This result for the pair scaled by ``1 / factor`` (:meth:`Prediction.scaled`): the
        network's answer for a pair it was given scaled down, in the pair's units. Supports
        stay as they are (counted in the network's units, where the search compared them)."""
        if factor == 1.0:
            return self
        alternatives = []
        for transform, support in self.alternatives:
            t = transform.copy()
            t[:3, 3] *= factor
            alternatives.append((t, support))
        mirror = self.mirror
        if mirror is not None:
            inner = mirror

            def mirror(k: int) -> Prediction | None:
                found = inner(k)
                return None if found is None else found.scaled(factor)

        return SearchResult(self.prediction.scaled(factor), self.support, self.hypothesis,
                            self.tried, alternatives, mirror)  # fmt: skip


class OrientationSearch:
    """The network run under each proposed hypothesis; the best-supported estimate wins.

    Args:
        network: the loaded network.
        sources: hypothesis sources, asked in order; those returning None contribute nothing.
            With no hypothesis at all, the pair is run as given.
        acceptance_radius: inlier distance of the support (metres; default the network's own
            LGR acceptance radius).
    """

    def __init__(
        self,
        network: Registrar | OnnxRegistrar,
        sources: Sequence[HypothesisSource],
        acceptance_radius: float | None = None,
    ) -> None:
        self.network = network
        self.sources = list(sources)
        self.acceptance_radius = (
            network.config.acceptance_radius if acceptance_radius is None else acceptance_radius
        )

    @classmethod
    def from_config(
        cls, network: Registrar | OnnxRegistrar, config: SearchConfig
    ) -> OrientationSearch:
        """The sources a :class:`SearchConfig` names, for this network."""
        if config.orientation_search == "manhattan":
            voxel = max(0.05, network.config.voxel_size)
            sources: list[HypothesisSource] = [
                ManhattanHypotheses(voxel, config.orientation_keep, config.orientation_rank_voxel)
            ]
        else:
            sources = [IdentityHypotheses()]
        return cls(network, sources)

    @property
    def plain(self) -> bool:
        """True when the search is the identity alone: pairs can share one batched pass."""
        return all(isinstance(s, IdentityHypotheses) for s in self.sources)

    def __call__(
        self, src: np.ndarray, ref: np.ndarray, as_given: bool = True
    ) -> SearchResult | None:
        """Search one pair: ``src (N, 3)``, ``ref (M, 3)`` in metres. When no source applies
        the pair is run as given, or with ``as_given=False`` None is returned."""
        start = time.perf_counter()
        if self.plain:
            keeping = getattr(self.network, "keeping", None)
            if keeping is not None:  # the mirror image reuses this pass's reference and
                pred, turned = keeping(src, ref)  # embeddings: one backbone, one matching
                mirror = lambda k: turned(REFLECTION)  # noqa: E731
            else:
                pred = self.network(src, ref)
                mirror = lambda k: self.network(mirrored(src), ref)  # noqa: E731
            support = pred.consensus(self.acceptance_radius)
            found = SearchResult(pred, support, "identity", 1, [(pred.transform, support)])
            found.mirror = mirror
            return found
        best: SearchResult | None = None
        tried = 0
        alternatives: list[tuple[np.ndarray, float]] = []
        mirror = None
        for source in self.sources:
            hyp = source.propose(src, ref)
            if hyp is None or len(hyp.rotations) == 0:
                logger.debug("orientation search: %s does not apply", source.name)
                continue
            src_c = np.asarray(src, np.float64) @ hyp.src_frame.T
            ref_c = np.asarray(ref, np.float64) @ hyp.ref_frame.T
            prepare = getattr(self.network, "prepare", None)
            if prepare is not None:
                run = prepare(src_c, ref_c)
            else:
                run = partial(self.network.hypotheses, src_c, ref_c)
            preds = run(hyp.rotations)
            tried += len(preds)
            for pred, rot, label in zip(preds, hyp.rotations, hyp.labels, strict=True):
                support = pred.consensus(self.acceptance_radius)
                turned = pred.transform_rotated(rot @ hyp.src_frame, hyp.ref_frame)
                alternatives.append((turned, support))
                if best is None or support > best.support:
                    best = SearchResult(
                        pred.rotated(rot @ hyp.src_frame, hyp.ref_frame), support, label, 0
                    )
                    mirror = self._mirror_of(hyp, run, prepare is not None, src_c, ref_c)
        if best is None and not as_given:
            return None
        if best is None:  # no source applied: the pair as given
            pred = self.network(src, ref)
            best = SearchResult(pred, pred.consensus(self.acceptance_radius), "identity", 0)
            mirror = lambda k: self.network(mirrored(src), ref)  # noqa: E731
            tried = 1
        best.mirror = mirror
        best.tried = tried
        best.alternatives = alternatives or [(best.prediction.transform, best.support)]
        best.prediction.time_s = time.perf_counter() - start
        logger.debug("orientation search: %d hypotheses run, %s chosen", tried, best.hypothesis)
        return best

    def _mirror_of(
        self,
        hyp: Hypotheses,
        run: Callable[[np.ndarray], list[Prediction]],
        reusable: bool,
        src_c: np.ndarray,
        ref_c: np.ndarray,
    ) -> Callable[[int], Prediction | None] | None:
        """:attr:`SearchResult.mirror` for the hypotheses ``hyp`` of one source: the mirror
        image's ``k`` best-ranked rotations, run by ``run`` (``reusable``: it takes improper
        rotations on the canonical source's pyramid) or on the reflected canonical source;
        None where the ranking gives none."""
        if hyp.rank_mirror is None:
            return None

        def mirror(k: int) -> Prediction | None:
            rotations = hyp.rank_mirror(k)
            if not len(rotations):
                return None
            if reusable:  # improper: rot @ R on the canonical source's own pyramid
                preds = run(rotations @ REFLECTION)
            else:
                preds = self.network.hypotheses(mirrored(src_c), ref_c, rotations)
            supports = [p.consensus(self.acceptance_radius) for p in preds]
            i = int(np.argmax(supports))
            # the network saw rot @ R @ src_frame @ src = (that @ R) @ mirrored(src), R = R^-1
            to_image = rotations[i] @ REFLECTION @ hyp.src_frame @ REFLECTION
            return preds[i].rotated(to_image, hyp.ref_frame)

        return mirror
