"""Zero-shot benchmark: the default ``pcreg register SRC REF`` on scans no model trained on,
beside Open3D FPFH + RANSAC and KISS-Matcher at their best voxel for each group.

Groups (evaluation data, never trained on; see ``../shared/train_data/README.md``):

* the Stanford bunny range scans, every pair whose overlap is at least 30 % both ways;
* the same pairs in millimetres;
* Stanford dragon range scans, the first ``dragon_pairs`` pairs with overlap >= 30 %;
* TUM RGB-D fr1/xyz depth frames, back-projected with the Kinect intrinsics;
* the 3DMatch pairs of ``../shared/data``;
* the KITTI pairs of ``../shared/data``, under a full 3-D rotation and under yaw only.

Each source is moved by a seeded random motion: a uniform random rotation (about the vertical
only for "yaw") and a translation of uniform direction and length up to a third of the
reference's extent. Success: RRE < 10 deg and RMSE (the source moved by the estimate vs by the
truth) <= 5 % of the reference's bounding-box diagonal; for KITTI, RRE < 2 deg and RTE < 0.3 m.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pcreg.geometry import pose_errors
from pcreg.registration.promise import keeps_promise

__all__ = ["ZeroShotCase", "format_zero_shot_table", "run_zero_shot", "zero_shot_cases"]

logger = logging.getLogger(__name__)

#: per group: the voxel sizes (in the group's units) FPFH + RANSAC and KISS-Matcher are run at;
#: the table reports each peer at its best one
PEER_VOXELS = {
    "bunny": (0.002, 0.004, 0.008),
    "bunny (mm)": (2.0, 4.0, 8.0),
    "dragon": (0.002, 0.004, 0.008),
    "TUM RGB-D": (0.025, 0.05),
    "3DMatch": (0.025, 0.05),
    "KITTI, any rotation": (0.3, 0.5),
    "KITTI, yaw": (0.3, 0.5),
}


@dataclass
class ZeroShotCase:
    """One moved pair: ``ref ≈ gt @ src`` (``gt`` 4x4), in the group's units."""

    group: str
    name: str
    src: np.ndarray
    ref: np.ndarray
    gt: np.ndarray
    kitti: bool = False


@dataclass
class Outcome:
    success: bool
    time_s: float
    path: str = ""  # pcreg: method_used
    #: pcreg: the result said ``registered`` (None for peers, which give no verdict)
    registered: bool | None = None
    #: pcreg: its transform is right by the criterion, whatever it said
    right: bool = False


@dataclass
class GroupRow:
    group: str
    n: int = 0
    pcreg: list[Outcome] = field(default_factory=list)
    peers: dict[str, dict[float, list[Outcome]]] = field(default_factory=dict)


def _motion(rng: np.random.Generator, extent: float, yaw_only: bool) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    out = np.eye(4)
    if yaw_only:
        out[:3, :3] = Rotation.from_euler("z", rng.uniform(-np.pi, np.pi)).as_matrix()
    else:
        out[:3, :3] = Rotation.random(random_state=int(rng.integers(2**31))).as_matrix()
    direction = rng.normal(size=3)
    out[:3, 3] = direction / np.linalg.norm(direction) * rng.uniform(0, extent / 3)
    return out


def _moved(group, name, src, ref, gt, rng, draws, kitti=False, yaw=False) -> Iterator[ZeroShotCase]:
    from pcreg.registration.checks import cloud_extent

    extent = cloud_extent(ref)
    for d in range(draws):
        m = _motion(rng, extent, yaw)
        moved = src @ m[:3, :3].T + m[:3, 3]
        yield ZeroShotCase(group, f"{name} #{d}", moved, ref, gt @ np.linalg.inv(m), kitti)


def _stanford(
    root: Path, limit: int | None
) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    meta = json.loads((root / "pairs.json").read_text())
    out = []
    for p in meta["pairs"]:
        if min(p["overlap_src_1mm"], p["overlap_ref_1mm"]) < 0.3:
            continue
        src = np.load(root / p["src"]).astype(np.float64)
        ref = np.load(root / p["ref"]).astype(np.float64)
        name = f"{Path(p['ref']).stem}<-{Path(p['src']).stem}"
        out.append((name, src, ref, np.asarray(p["T_ref_src"], np.float64)))
        if limit is not None and len(out) >= limit:
            break
    return out


def _tum(root: Path) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """The TUM depth pairs back-projected: z = value / 5000, x = (u - 319.5) z / 525,
    y = (v - 239.5) z / 525 (the folder's README)."""
    import open3d as o3d

    def cloud(path: Path) -> np.ndarray:
        depth = np.asarray(o3d.io.read_image(str(path)), np.float64) / 5000.0
        v, u = np.nonzero(depth > 0)
        z = depth[v, u]
        return np.column_stack([(u - 319.5) * z / 525.0, (v - 239.5) * z / 525.0, z])

    meta = json.loads((root / "pairs.json").read_text())
    return [
        (Path(p["src"]).parent.name, cloud(root / p["src"]), cloud(root / p["ref"]),
         np.asarray(p["T_ref_src"], np.float64))
        for p in meta["pairs"]
    ]  # fmt: skip


def zero_shot_cases(
    shared_data: Path, draws: int = 3, seed: int = 0, dragon_pairs: int = 10
) -> list[ZeroShotCase]:
    """Every group whose data exists under ``shared_data`` (``../shared/data``) and its
    sibling ``train_data``, ``draws`` seeded motions per pair."""
    from pcreg.bench.real_pairs import real_pairs
    from pcreg.io import read_points

    rng = np.random.default_rng(seed)
    train = shared_data.parent / "train_data"
    cases: list[ZeroShotCase] = []
    bunny = train / "stanford_bunny_range_scans"
    if bunny.is_dir():
        pairs = _stanford(bunny, None)
        for name, s, r, gt in pairs:
            cases += _moved("bunny", name, s, r, gt, rng, draws)
        for name, s, r, gt in pairs:
            mm = gt.copy()
            mm[:3, 3] *= 1000
            cases += _moved("bunny (mm)", name, s * 1000, r * 1000, mm, rng, draws)
    dragon = train / "stanford_dragon_stand_range_scans"
    if dragon.is_dir():
        for name, s, r, gt in _stanford(dragon, dragon_pairs):
            cases += _moved("dragon", name, s, r, gt, rng, draws)
    tum = train / "tum_fr1xyz_depth_pairs"
    if tum.is_dir():
        for name, s, r, gt in _tum(tum):
            cases += _moved("TUM RGB-D", name, s, r, gt, rng, draws)
    for pair in real_pairs(shared_data):
        src, ref = read_points(pair.src), read_points(pair.ref)
        gt = np.asarray(pair.gt, np.float64)
        if pair.setting == "indoor":
            cases += _moved("3DMatch", pair.name, src, ref, gt, rng, draws)
        else:
            cases += _moved("KITTI, any rotation", pair.name, src, ref, gt, rng, draws, True)
            cases += _moved("KITTI, yaw", pair.name, src, ref, gt, rng, draws, True, yaw=True)
    return cases


def success(case: ZeroShotCase, transform: np.ndarray | None) -> bool:
    if transform is None or not np.isfinite(transform).all():
        return False
    err = pose_errors(transform, case.gt, case.src)
    diagonal = float(np.linalg.norm(np.ptp(case.ref, axis=0)))
    return keeps_promise(err, diagonal, street=case.kitti)


def _fpfh(voxel: float) -> Callable[[ZeroShotCase], np.ndarray]:
    def run(case: ZeroShotCase) -> np.ndarray:
        from pcreg.baselines import fpfh_ransac, icp_refine

        est = fpfh_ransac(case.src, case.ref, voxel).transform
        return icp_refine(case.src, case.ref, est, voxel, 100, tolerance=1e-8).transform

    return run


def _kiss(voxel: float) -> Callable[[ZeroShotCase], np.ndarray]:
    """KISS-Matcher at ``voxel``, its noise bounds clamped (its default) or not, whichever
    finds the larger consensus (its own inlier count: the choice a user could make without
    ground truth). It assumes metres at LiDAR scale: it refuses voxels under about 5 mm ("Too
    small voxel size"), so on objects in metres only the coarsest candidate runs."""

    def run(case: ZeroShotCase) -> np.ndarray:
        import kiss_matcher

        best, best_inliers = np.eye(4), -1
        for clamp in (True, False):
            config = kiss_matcher.KISSMatcherConfig(voxel, enable_noise_bound_clamping=clamp)
            matcher = kiss_matcher.KISSMatcher(config)
            sol = matcher.estimate(case.src.astype(np.float32), case.ref.astype(np.float32))
            inliers = int(matcher.get_num_final_inliers())
            if inliers > best_inliers:
                best_inliers = inliers
                best = np.eye(4)
                best[:3, :3] = np.asarray(sol.rotation)
                best[:3, 3] = np.asarray(sol.translation).reshape(3)
        return best

    return run


def peers() -> dict[str, Callable[[float], Callable[[ZeroShotCase], np.ndarray]]]:
    """The peers that can run here: FPFH + RANSAC + ICP, and KISS-Matcher when installed
    (``pip install kiss-matcher``)."""
    out: dict[str, Callable[[float], Callable[[ZeroShotCase], np.ndarray]]] = {
        "FPFH + RANSAC + ICP": _fpfh
    }
    try:
        import kiss_matcher  # noqa: F401
    except ImportError:
        logger.warning("kiss-matcher is not installed: its column is left out")
    else:
        out["KISS-Matcher"] = _kiss
    return out


def _timed(fn, case):
    start = time.perf_counter()
    try:
        result = fn(case)
    except Exception as err:
        logger.info("%s %s: %s", case.group, case.name, err)
        result = None
    return result, time.perf_counter() - start


def run_zero_shot(cases: list[ZeroShotCase], with_peers: bool = True) -> list[GroupRow]:
    """Run the default registration and the peers on every case (progress on stderr)."""
    from tqdm import tqdm

    from pcreg.api import register_points

    rows: dict[str, GroupRow] = {}
    makers = peers() if with_peers else {}
    for case in tqdm(cases, desc="zero-shot", unit="pair"):
        row = rows.setdefault(case.group, GroupRow(case.group))
        row.n += 1
        res, t = _timed(lambda c: register_points(c.src, c.ref), case)
        right = res is not None and success(case, res.transform)
        registered = res is not None and res.registered
        row.pcreg.append(Outcome(registered and right, t,
                                 res.method_used if res is not None else "error",
                                 registered, right))  # fmt: skip
        for name, make in makers.items():
            for voxel in PEER_VOXELS[case.group]:
                est, t = _timed(make(voxel), case)
                row.peers.setdefault(name, {}).setdefault(voxel, []).append(
                    Outcome(success(case, est), t)
                )
    return list(rows.values())


def _cell(outcomes: list[Outcome]) -> str:
    n, ok = len(outcomes), sum(o.success for o in outcomes)
    return f"{100 * ok / n:.0f}% ({ok}/{n}) / {np.median([o.time_s for o in outcomes]):.2f}"


def format_zero_shot_table(rows: list[GroupRow], command: str) -> str:
    from pcreg.bench.report import machine_description

    names = sorted({p for r in rows for p in r.peers})
    head = (
        "| group | n | pcreg (default): success / median s | max s | wrong but registered | "
        "right but refused | learned / FPFH+network / FPFH |"
    )
    head += "".join(f" {p} at its best voxel: success / median s |" for p in names)
    lines = [
        "## Zero-shot: any scan, any units, any orientation",
        "",
        "Every source moved by a seeded random motion (uniform rotation, about the vertical only "
        "for 'yaw'; translation up to a third of the reference's extent). Success: RRE < 10 deg "
        "and RMSE <= 5 % of the reference's diagonal; KITTI RRE < 2 deg and RTE < 0.3 m. "
        "pcreg: `pcreg register SRC REF` with no flags (a result counts only when it says "
        "`registered`); the next column splits its successes by the path that produced them: "
        "the network with its orientation search, the network run from the FPFH + RANSAC "
        "pose, FPFH + RANSAC + ICP alone. 'Wrong but registered': said `registered` with a "
        "transform that fails the criterion; 'right but refused': a right transform said "
        "`registered: false`.",
        "",
        head,
        "|---|---|---|---|---|---|---|" + "---|" * len(names),
    ]
    for r in rows:
        ok = [o for o in r.pcreg if o.success]
        split = " / ".join(
            str(sum(o.path == p for o in ok))
            for p in ("geotransformer", "fpfh-ransac+geotransformer", "fpfh-ransac")
        )
        wrong = sum(bool(o.registered) and not o.right for o in r.pcreg)
        refused = sum(o.right and not o.registered for o in r.pcreg)
        slowest = max((o.time_s for o in r.pcreg), default=0.0)
        cells = [f"| {r.group} | {r.n} | {_cell(r.pcreg)} | {slowest:.2f} | {wrong} | "
                 f"{refused} | {split} |"]  # fmt: skip
        for p in names:
            by_voxel = r.peers.get(p, {})
            if not by_voxel:
                cells.append(" n/a |")
                continue
            voxel = max(by_voxel, key=lambda v: (sum(o.success for o in by_voxel[v]), -v))
            cells.append(f" {_cell(by_voxel[voxel])} at {voxel:g} |")
        lines.append("".join(cells))
    lines += ["", f"Measured with `{command}` on {machine_description()}."]
    return "\n".join(lines)
