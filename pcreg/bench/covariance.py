"""Coverage of the pose covariance (:func:`pcreg.registration.information.pose_covariance`): how
often the true pose lies inside the covariance's 95 % ellipsoid.

For each registered pair with a ground truth the error is the motion of the source frame that
takes the estimate to the truth, ``E = inv(T_est) @ T_gt`` (``T_gt = T_est @ E``), as the
6-vector of the covariance, :func:`pose_delta`: ``(rx, ry, rz)`` the rotation vector of
``E``'s rotation (radians), then ``(tx, ty, tz)`` ``E``'s translation (input units). This is
the parametrisation the information matrix linearises, ``p -> exp([r]x) p + t`` on the source
points (Jacobian ``[-[p]x | I]``); it equals the SE(3) logarithm to first order. Its squared
Mahalanobis distance ``d2 = deltaᵀ C⁻¹ delta`` is chi-square with 6 degrees of freedom when
``C`` is right, so 95 % of the pairs should have ``d2 <= chi2.ppf(0.95, 6) = 12.59`` and the
median of ``d2 / 6`` should be near 0.89 (the chi-square(6) median over 6); a median far above
1 is the factor by which ``C`` is too small.

Only pairs that registered at the right pose (the zero-shot criterion,
:func:`pcreg.bench.zero_shot.success`) are scored: a covariance describes the spread about a
right estimate, not a wrong basin; the wrong-but-registered ones are counted beside.

Pairs: :func:`generated_cases` (the procedural objects, rooms and streets of
:mod:`pcreg.data.synthetic`) and :func:`kitti_training_cases` (the real KITTI training sweeps
of ``../shared/train_data``, sequences 00-07): the calibration sets, from which
:func:`fit_floor` gives each kind's floor; the zero-shot cases of
:func:`pcreg.bench.zero_shot.zero_shot_cases` (real scans never fitted on: the independent
check).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pcreg.bench.zero_shot import ZeroShotCase, success

__all__ = [
    "CHI2_95_6",
    "CovarianceSample",
    "coverage_rows",
    "fit_floor",
    "fitted_floors",
    "format_coverage_table",
    "generated_cases",
    "kitti_training_cases",
    "mahalanobis2",
    "measure",
    "pose_delta",
]

logger = logging.getLogger(__name__)

#: ``scipy.stats.chi2.ppf(0.95, 6)``: the squared radius of the 95 % ellipsoid in 6-D
CHI2_95_6 = 12.591587243743977


def pose_delta(estimate: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """``(6,)`` the source-frame motion from ``estimate`` to ``truth`` (both ``(4, 4)``
    ``T_ref_src``): rotation vector (rad) then translation (input units) of
    ``inv(estimate) @ truth`` (see the module docstring)."""
    from scipy.spatial.transform import Rotation

    e = np.linalg.inv(np.asarray(estimate, np.float64)) @ np.asarray(truth, np.float64)
    return np.concatenate([Rotation.from_matrix(e[:3, :3]).as_rotvec(), e[:3, 3]])


def mahalanobis2(delta: np.ndarray, covariance: np.ndarray) -> float:
    """``deltaᵀ C⁻¹ delta`` for ``delta (6,)`` and ``covariance (6, 6)``; inf where ``C`` is
    NaN or singular."""
    if not np.isfinite(covariance).all():
        return float("inf")
    try:
        return float(delta @ np.linalg.solve(covariance, delta))
    except np.linalg.LinAlgError:
        return float("inf")


@dataclass
class CovarianceSample:
    """One registration: its group and name, whether it said ``registered`` and is right,
    the error ``delta (6,)``, and the pieces of the covariance (``information (6, 6)``,
    ``variance`` sigma² in input units², ``count`` correspondences, ``voxel`` input units), so
    that any calibration can be scored without registering again."""

    group: str
    name: str
    registered: bool
    right: bool
    delta: np.ndarray
    information: np.ndarray
    variance: float
    count: int
    voxel: float
    #: the calibration's kind: ``"object"`` where the result says ``object``, else its setting
    kind: str = "indoor"

    def covariance(self, calibrated: bool = True, floor: float | None = None) -> np.ndarray:
        """``(6, 6)``: calibrated with its kind's floor (``floor`` voxels where given), or
        ICP's own; NaN where the information matrix is singular."""
        from pcreg.registration.information import calibrated_variance

        if self.count < 3 or np.linalg.matrix_rank(self.information) < 6:
            return np.full((6, 6), np.nan)
        scale = (
            calibrated_variance(self.variance, self.count, self.voxel, self.kind, floor)
            if calibrated
            else self.variance
        )
        return scale * np.linalg.inv(self.information)

    def d2(self, calibrated: bool = True, floor: float | None = None) -> float:
        return mahalanobis2(self.delta, self.covariance(calibrated, floor))


def generated_cases(
    objects: tuple[int, ...] = tuple(range(101, 110)),
    rooms: tuple[int, ...] = tuple(range(101, 107)),
    streets: tuple[int, ...] = (101, 102, 103),
    pairs_per_scene: int = 12,
) -> list[ZeroShotCase]:
    """Generated pairs in their sensor frames (no extra motion): ``object`` (turntable views,
    overlap > 0.3), ``indoor`` (room fragments, overlap > 0.3), ``outdoor`` (consecutive street
    scans about 10 m apart, scored by the KITTI criterion); at most ``pairs_per_scene`` of each
    scene. The default seeds are the calibration set of :mod:`pcreg.registration.information`."""
    from pcreg.data.synthetic import indoor_pairs, outdoor_pairs
    from pcreg.data.synthetic.objects import object_pairs

    out: list[ZeroShotCase] = []
    for group, seeds, make in (
        ("object", objects, lambda s: object_pairs(s)),
        ("indoor", rooms, lambda s: indoor_pairs(s, min_overlap=0.3)),
        ("outdoor", streets, lambda s: outdoor_pairs(s, num_scans=pairs_per_scene + 1)),
    ):
        for seed in seeds:
            for p in make(seed)[:pairs_per_scene]:
                out.append(ZeroShotCase(
                    group, f"{p.scene} {p.ref_id}<-{p.src_id}", p.src.astype(np.float64),
                    p.ref.astype(np.float64), np.asarray(p.transform, np.float64),
                    kitti=group == "outdoor"))  # fmt: skip
    return out


#: the KITTI training sweeps (sequences 00-07, SemanticKITTI poses) beside ``../shared/data``
KITTI_TRAINING = Path("train_data") / "kitti_seq00-07_semantickitti_mini"


def kitti_training_cases(shared_data: Path, draws: int = 1, seed: int = 0) -> list[ZeroShotCase]:
    """The 52 pairs of the KITTI training sweeps beside ``shared_data`` (its sibling
    ``train_data``; none from sequences 08-10 nor near the frames of ``../shared/data``),
    each under ``draws`` seeded motions of a full rotation and ``draws`` of a yaw, group
    ``"outdoor (KITTI training)"``, scored by the KITTI criterion; ``[]`` where absent. The
    truth is the poses as shipped (SemanticKITTI's, from sweeps that are not deskewed: ICP
    moves them 3.3 cm median, the data's README), so a floor fitted here holds that error too."""
    import json

    from pcreg.bench.zero_shot import _moved
    from pcreg.io import read_points

    root = Path(shared_data).parent / KITTI_TRAINING
    if not (root / "pairs.json").is_file():
        return []
    rng = np.random.default_rng(seed)
    out: list[ZeroShotCase] = []
    for p in json.loads((root / "pairs.json").read_text())["pairs"]:
        src, ref = read_points(root / p["src"]), read_points(root / p["ref"])
        gt = np.asarray(p["T_ref_src"], np.float64)
        name = f"{p['seq']} {p['ref_frame']}<-{p['src_frame']}"
        group = "outdoor (KITTI training)"
        out += _moved(group, name, src, ref, gt, rng, draws, kitti=True)
        out += _moved(group, name, src, ref, gt, rng, draws, kitti=True, yaw=True)
    return out


def fit_floor(samples: list[CovarianceSample], kind: str, coverage: float = 0.95) -> float:
    """The smallest floor ``c`` (voxels, :func:`pcreg.registration.information.
    calibrated_variance`) whose 95 % ellipsoid holds ``coverage`` of the right registrations
    of ``kind`` among ``samples`` (to 0.5 %; ``nan`` where there are none). ``d2`` falls as
    ``c`` grows, so the search bisects ``log c`` over [1e-4, 100]: 1e-4 where that already
    holds them (ICP's own spread suffices), ``inf`` where even 100 does not. A sample whose
    information matrix is singular has no ellipsoid and counts as not held."""
    right = [s for s in samples if s.right and s.kind == kind]
    if not right:
        return float("nan")

    def covered(c: float) -> float:
        return float(np.mean([s.d2(True, c) <= CHI2_95_6 for s in right]))

    lo, hi = 1e-4, 100.0
    if covered(hi) < coverage:
        return float("inf")
    if covered(lo) >= coverage:
        return lo
    while hi / lo > 1.005:
        mid = float(np.sqrt(lo * hi))
        lo, hi = (lo, mid) if covered(mid) >= coverage else (mid, hi)
    return hi


def measure(cases: list[ZeroShotCase], progress: bool = True) -> list[CovarianceSample]:
    """Register every case with the default pipeline and keep what the coverage needs (the
    covariance at the estimate, the error against the truth); cases that did not register are
    left out."""
    from tqdm import tqdm

    from pcreg.api import register_points
    from pcreg.registration.information import information_matrix, residual_variance

    out = []
    for case in tqdm(cases, desc="covariance", unit="pair", disable=not progress):
        try:
            res = register_points(case.src, case.ref)
        except Exception as err:  # a refused input is a pair that did not register
            logger.info("%s %s: %s", case.group, case.name, err)
            continue
        if not res.registered:
            continue
        info = information_matrix(case.src, case.ref, res.transform, res.voxel_size)
        variance, count = residual_variance(case.src, case.ref, res.transform, res.voxel_size)
        out.append(CovarianceSample(
            case.group, case.name, True, success(case, res.transform),
            pose_delta(res.transform, case.gt), info, variance, count, res.voxel_size,
            "object" if res.object else res.setting))  # fmt: skip
    return out


@dataclass
class CoverageRow:
    group: str
    n: int  # registered and right
    wrong: int  # registered but wrong (not scored)
    covered: int  # d2 <= CHI2_95_6, calibrated
    median_scale: float  # median d2 / 6, calibrated
    covered_raw: int  # uncalibrated
    median_scale_raw: float


def coverage_rows(samples: list[CovarianceSample]) -> list[CoverageRow]:
    """Per group (in order of first appearance): the share of right registrations whose error
    lies in the 95 % ellipsoid, and the median ``d2 / 6``, with and without the calibration."""
    rows = []
    for group in dict.fromkeys(s.group for s in samples):
        mine = [s for s in samples if s.group == group]
        right = [s for s in mine if s.right]
        cal = np.array([s.d2(True) for s in right])
        raw = np.array([s.d2(False) for s in right])
        rows.append(CoverageRow(
            group, len(right), len(mine) - len(right), int(np.sum(cal <= CHI2_95_6)),
            float(np.median(cal)) / 6 if len(cal) else float("nan"),
            int(np.sum(raw <= CHI2_95_6)),
            float(np.median(raw)) / 6 if len(raw) else float("nan")))  # fmt: skip
    return rows


def _share(k: int, n: int) -> str:
    return f"{100 * k / n:.0f}% ({k}/{n})" if n else "n/a"


#: which calibration set fits each kind's floor (:func:`fit_floor`): real LiDAR sweeps where
#: there are some, generated pairs for the rest
FIT_SETS = {"object": "generated", "indoor": "generated", "outdoor": "KITTI training"}


def fitted_floors(sets: dict[str, list[CovarianceSample]]) -> dict[str, float]:
    """Each kind's :func:`fit_floor` on the set :data:`FIT_SETS` names (the first set whose
    name starts with it)."""
    out = {}
    for kind, prefix in FIT_SETS.items():
        named = [v for k, v in sets.items() if k.startswith(prefix)]
        if named:
            out[kind] = fit_floor(named[0], kind)
    return out


def format_coverage_table(sets: dict[str, list[CovarianceSample]], command: str) -> str:
    """The BENCHMARKS.md section: one table row per group of each named set of samples, and
    the floors the calibration sets give now (:func:`fitted_floors`) beside the shipped ones."""
    from pcreg.bench.report import machine_description
    from pcreg.registration.information import COVARIANCE_FLOOR_VOXELS

    floors = ", ".join(f"{k} {c:g}" for k, c in COVARIANCE_FLOOR_VOXELS.items())
    refit = ", ".join(f"{k} {c:.3g}" for k, c in fitted_floors(sets).items())
    lines = [
        "## Pose covariance coverage",
        "",
        "`pcreg register --json` reports a 6x6 `covariance` of the pose (rotation in rad, then "
        "translation; a motion of the source frame). The error of each right registration, "
        "`delta = log(inv(T_est) @ T_gt)` in that order and frame, is scored by its squared "
        "Mahalanobis distance `d2 = delta^T C^-1 delta`: a calibrated covariance puts 95 % of "
        "the errors inside its 95 % ellipsoid (`d2 <= chi2.ppf(0.95, 6) = 12.59`) and has a "
        "median `d2 / 6` near 0.89. 'Raw' is ICP's `sigma^2 inv(information)` (the residual "
        "variance over the correspondences, as if they were independent); 'calibrated' adds "
        "a floor, `(c voxel)^2 N inv(information)` with c per kind of registration "
        f"({floors}; `pcreg.registration.information`), the kind being what the result says "
        "(`object`, else its setting). Each floor is the smallest c whose 95 % ellipsoid holds "
        "95 % of its kind's right registrations in a calibration set: objects and rooms on the "
        "generated pairs, outdoor on the KITTI training sweeps (sequences 00-07, their "
        "SemanticKITTI poses as the truth; the generated streets are then a check). The real "
        "scans of the check were not used to fit them. Wrong registrations (registered, but "
        "failing the zero-shot criterion) are not scored and are counted beside.",
        "",
        "| set | group | right registrations | wrong (not scored) | raw: inside 95 % | raw: "
        "median d2/6 | calibrated: inside 95 % | calibrated: median d2/6 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, samples in sets.items():
        for r in coverage_rows(samples):
            lines.append(
                f"| {name} | {r.group} | {r.n} | {r.wrong} | {_share(r.covered_raw, r.n)} | "
                f"{r.median_scale_raw:.3g} | {_share(r.covered, r.n)} | {r.median_scale:.3g} |"
            )
    lines += [
        "",
        f"The calibration sets of this run give the floors {refit}.",
        "",
        f"Measured with `{command}` on {machine_description()}.",
    ]
    return "\n".join(lines)
