"""The labelled verdict set: the ``auto`` search's own candidates on pairs of every kind, each
labelled right or wrong by the ground truth (or wrong by construction where no rigid answer
exists), for fitting and measuring :mod:`pcreg.registration.verdict`.

Data (disjoint from every evaluation set: no Stanford bunny or dragon, no TUM, nothing of
``../shared/data``):

* **rooms**: generated rooms (seeds from 3,000,000: neither the indoor network's training
  rooms 0-199, its validation rooms 1,000,000+, nor the old calibration rooms 2,000,000+);
* **objects**: generated composite objects, turntable views (:mod:`pcreg.data.synthetic.objects`),
  some of them a single box or cylinder (symmetric);
* **streets**: generated streets (seeds from 4,000,000) and the KITTI scans of
  ``../shared/train_data`` (sequences 00-07, the outdoor network's training data).

Classes per family (``cls``): ``pair`` (a true pair under a random rigid motion), ``units``
(the pair in millimetres: other readings of the units compete), ``chunk`` (the first or last
30-45 % of the source's points, as stored, onto the reference), ``sparse`` (every 20th-100th
source point), ``mirror`` (the source mirrored: no rigid answer), ``disjoint`` (two parts of one
scan with a gap between them: no overlap), ``unrelated`` (scans of two different scenes of the
family), ``cross`` (scans of two families, one rescaled to the other's size), ``symmetric``
(objects: views of one box or cylinder). ICP local optima and wrong unit readings occur inside
the search itself and are labelled like every other candidate.

A candidate is right when it meets the zero-shot benchmark's criterion: RRE < 10 deg and RMSE
<= 5 % of the reference's diagonal (streets: RRE < 2 deg and RTE < 0.3 m).
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

__all__ = [
    "CONGRUENT",
    "VerdictCase",
    "cases",
    "fresh_room_cases",
    "label_candidates",
    "mirror_congruence",
    "split_of",
]

logger = logging.getLogger(__name__)

ROOM_SEED = 3_000_000
STREET_SEED = 4_000_000
OBJECT_SEED = 5_000_000
#: one scene in this many is held out (by a hash of its name): test, never fitted on
HOLDOUT_EVERY = 4


@dataclass
class VerdictCase:
    """One pair: ``ref ≈ gt @ src`` (None: no rigid answer exists, every estimate is wrong)."""

    family: str  # rooms | objects | streets
    cls: str
    scene: str
    name: str
    src: np.ndarray
    ref: np.ndarray
    gt: np.ndarray | None
    street: bool = False
    #: mirror cases: how well the mirrored source fits the source itself under a rigid motion
    #: (:func:`mirror_congruence`); from :data:`CONGRUENT` on, a rigid answer exists after all
    congruence: float | None = None
    #: a case of a symmetric object (a box or a cylinder, every class): the data cannot tell
    #: its symmetric poses apart, so every estimate counts as wrong
    symmetric: bool = False


def split_of(scene: str) -> str:
    """``"test"`` for one scene in :data:`HOLDOUT_EVERY` (stable hash of its name), else
    ``"fit"``: every case of a scene lands on one side."""
    return "test" if zlib.crc32(scene.encode()) % HOLDOUT_EVERY == 0 else "fit"


def _moved(src: np.ndarray, gt: np.ndarray | None, rng, yaw_only: bool = False):
    """``src`` under a random motion and the truth for it."""
    from pcreg.bench.zero_shot import _motion  # the zero-shot benchmark's motions

    extent = float(np.linalg.norm(np.ptp(src, axis=0)))
    m = _motion(rng, extent, yaw_only)
    moved = src @ m[:3, :3].T + m[:3, 3]
    return moved, (None if gt is None else gt @ np.linalg.inv(m))


def _disjoint(cloud: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """Two parts of ``cloud`` along its longest axis with a gap of 20 % of it between them."""
    axis = int(np.argmax(np.ptp(cloud, axis=0)))
    lo, hi = np.quantile(cloud[:, axis], [0.4, 0.6])
    return cloud[cloud[:, axis] < lo], cloud[cloud[:, axis] > hi]


def _variants(family, scene, pair_name, src, ref, gt, rng, other, street) -> Iterator[VerdictCase]:
    """The classes of the module doc for one true pair; ``other``: a scan of another scene of
    the same family (unrelated), or None."""
    yaw = street  # streets stay upright in half the draws, like a car's scans
    s, g = _moved(src, gt, rng, yaw_only=yaw and rng.random() < 0.5)
    yield VerdictCase(family, "pair", scene, pair_name, s, ref, g, street)
    if not street:
        s, g = _moved(src, gt, rng)
        yield VerdictCase(family, "units", scene, pair_name + " mm", s * 1000, ref * 1000,
                          None if g is None else _scaled(g, 1000.0), street)  # fmt: skip
    n = len(src)
    k = int(n * rng.uniform(0.3, 0.45))
    part = src[:k] if rng.random() < 0.5 else src[-k:]
    s, g = _moved(part, gt, rng, yaw_only=yaw)
    yield VerdictCase(family, "chunk", scene, pair_name + " chunk", s, ref, g, street)
    stride = int(rng.choice([20, 50, 100]))
    if n // stride >= 60:
        s, g = _moved(src[::stride], gt, rng, yaw_only=yaw)
        yield VerdictCase(family, "sparse", scene, f"{pair_name} every {stride}", s, ref, g,
                          street)  # fmt: skip
    mirrored = src * np.array([-1.0, 1.0, 1.0])
    s, _ = _moved(mirrored, None, rng, yaw_only=yaw)
    voxel = 0.3 if street else float(np.linalg.norm(np.ptp(src, axis=0))) / 100  # 5 cm: a room
    yield VerdictCase(family, "mirror", scene, pair_name + " mirrored", s, ref, None, street,
                      mirror_congruence(src, voxel))  # fmt: skip
    a, b = _disjoint(ref, rng)
    if min(len(a), len(b)) >= 100:
        s, _ = _moved(a, None, rng, yaw_only=yaw)
        yield VerdictCase(family, "disjoint", scene, pair_name + " disjoint", s, b, None, street)
    if other is not None:
        s, _ = _moved(other, None, rng, yaw_only=yaw)
        yield VerdictCase(family, "unrelated", scene, pair_name + " unrelated", s, ref, None,
                          street)  # fmt: skip


#: a mirrored source that fits itself this well (share of its points within 1.5 voxels after
#: point-to-plane ICP from the best of the 24 cube rotations in its principal frame) is not a
#: negative: a rigid motion reproduces the mirror image. Measured: generated room fragments
#: 0.42-0.96 (boxes and planes), the real 3DMatch demo fragment 0.60.
CONGRUENT = 0.8


def mirror_congruence(points: np.ndarray, voxel: float) -> float:
    """How well ``points (N, 3)`` mirrored fits ``points`` under the best rigid motion found
    (fitness 0-1, :data:`CONGRUENT`)."""
    import open3d as o3d

    from pcreg.geometry.manhattan import CUBE_ROTATIONS

    centred = points - points.mean(axis=0)
    _, _, axes = np.linalg.svd(centred[:: max(1, len(centred) // 20000)], full_matrices=False)
    frame = centred @ axes.T

    def cloud(p):
        return o3d.geometry.PointCloud(o3d.utility.Vector3dVector(p)).voxel_down_sample(voxel)

    target, mirror = cloud(frame), cloud(frame * np.array([-1.0, 1.0, 1.0]))
    target.estimate_normals()
    reg = o3d.pipelines.registration
    best = 0.0
    for rot in CUBE_ROTATIONS:
        init = np.eye(4)
        init[:3, :3] = rot
        fit = reg.registration_icp(mirror, target, 1.5 * voxel, init,
                                   reg.TransformationEstimationPointToPlane())  # fmt: skip
        best = max(best, float(fit.fitness))
    return best


def _scaled(t: np.ndarray, factor: float) -> np.ndarray:
    out = t.copy()
    out[:3, 3] *= factor
    return out


def fresh_room_cases(first: int, count: int, pairs_per_scene: int = 3) -> Iterator[VerdictCase]:
    """Every class of the set on ``count`` generated rooms from seed ``first`` on (the set's
    own rooms start at :data:`ROOM_SEED`; pick seeds it never used, such as 3,000,900 on),
    as :func:`cases` draws them (``rng`` seeded with ``first``): what ``python
    tools/fresh_rooms.py`` runs through the default search."""
    rng = np.random.default_rng(first)
    for i in range(count):
        yield from _room_cases(i, rng, pairs_per_scene, base=first)


def _room_cases(
    index: int, rng, pairs_per_scene: int, base: int | None = None
) -> Iterator[VerdictCase]:
    from pcreg.data.synthetic.pairs import indoor_pairs

    seed = (ROOM_SEED if base is None else base) + index
    pairs, other = indoor_pairs(seed, min_overlap=0.1), indoor_pairs(seed + 10_000, min_overlap=0.1)
    yield from _scene_cases("rooms", pairs, other, rng, pairs_per_scene)


def _object_cases(index: int, rng, pairs_per_scene: int) -> Iterator[VerdictCase]:
    from pcreg.data.synthetic.objects import object_pairs

    seed = OBJECT_SEED + index
    symmetric = index % 5 == 4
    pairs, other = object_pairs(seed, symmetric=symmetric), object_pairs(seed + 10_000)
    for case in _scene_cases("objects", pairs, other, rng, pairs_per_scene):
        case.symmetric = symmetric
        if symmetric and case.cls == "pair":
            case.cls = "symmetric"
        yield case


def _scene_cases(family, pairs, other, rng, pairs_per_scene) -> Iterator[VerdictCase]:
    """The classes of up to ``pairs_per_scene`` of one scene's ``pairs`` (chosen at random),
    each unrelated case against a scan of ``other`` (another scene of the family)."""
    if not pairs:
        return
    pick = rng.choice(len(pairs), min(pairs_per_scene, len(pairs)), replace=False)
    for i in pick:
        p = pairs[int(i)]
        alien = other[int(rng.integers(len(other)))].src.astype(np.float64) if other else None
        yield from _variants(family, p.scene, f"{p.scene} {p.ref_id}<-{p.src_id}",
                             p.src.astype(np.float64), p.ref.astype(np.float64), p.transform,
                             rng, alien, False)  # fmt: skip


def _street_cases(index: int, rng, pairs_per_scene: int) -> Iterator[VerdictCase]:
    from pcreg.data.synthetic.pairs import outdoor_pairs

    seed = STREET_SEED + index
    pairs = outdoor_pairs(seed, num_scans=1 + pairs_per_scene)
    other = outdoor_pairs(seed + 10_000, num_scans=2)
    for p in pairs:
        alien = other[0].src.astype(np.float64) if other else None
        yield from _variants("streets", p.scene, f"{p.scene} {p.ref_id}<-{p.src_id}",
                             p.src.astype(np.float64), p.ref.astype(np.float64), p.transform,
                             rng, alien, True)  # fmt: skip


def _kitti_cases(root: Path, rng, limit: int | None) -> Iterator[VerdictCase]:
    meta = json.loads((root / "pairs.json").read_text())["pairs"]

    def scan(rel: str) -> np.ndarray:
        return np.fromfile(root / rel, np.float32).reshape(-1, 4)[:, :3].astype(np.float64)

    for p in meta[:limit]:
        others = [q for q in meta if q["seq"] != p["seq"]]
        alien = scan(others[int(rng.integers(len(others)))]["src"])
        scene = f"kitti-{p['seq']}"
        yield from _variants("streets", scene, f"{scene} {p['ref_frame']}<-{p['src_frame']}",
                             scan(p["src"]), scan(p["ref"]), np.asarray(p["T_ref_src"]),
                             rng, alien, True)  # fmt: skip


def _cross_cases(rooms: list[VerdictCase], streets: list[VerdictCase], objects, rng):
    """Pairs across families, each rescaled to the other's size (a street divided by 20 is a
    room-sized cloud; an object times 10 too)."""
    out = []
    for r, s, o in zip(rooms, streets, objects, strict=False):
        room, street, obj = r.ref, s.ref, o.ref
        sr = float(np.linalg.norm(np.ptp(room, 0)) / np.linalg.norm(np.ptp(street, 0)))
        out.append(VerdictCase("rooms", "cross", r.scene, r.name + " x street", room,
                               street * sr, None))  # fmt: skip
        so = float(np.linalg.norm(np.ptp(room, 0)) / np.linalg.norm(np.ptp(obj, 0)))
        out.append(VerdictCase("objects", "cross", o.scene, o.name + " x room",
                               obj, room / so, None))  # fmt: skip
        out.append(VerdictCase("streets", "cross", s.scene, s.name + " x room", street,
                               room / sr, None, True))  # fmt: skip
    return out


def cases(
    rooms: int,
    objects: int,
    streets: int,
    kitti_root: Path | None,
    pairs_per_scene: int = 3,
    seed: int = 0,
    kitti_limit: int | None = None,
) -> Iterator[VerdictCase]:
    """Every case of the set, scene by scene (generated lazily: one scene's clouds at a time,
    apart from the few kept for the cross-family pairs)."""
    rng = np.random.default_rng(seed)
    firsts: dict[str, list[VerdictCase]] = {"rooms": [], "streets": [], "objects": []}
    streams: list[Iterator[VerdictCase]] = [
        chain.from_iterable(_room_cases(i, rng, pairs_per_scene) for i in range(rooms)),
        chain.from_iterable(_object_cases(i, rng, pairs_per_scene) for i in range(objects)),
        chain.from_iterable(_street_cases(i, rng, pairs_per_scene) for i in range(streets)),
    ]
    if kitti_root is not None and (kitti_root / "pairs.json").is_file():
        streams.append(_kitti_cases(kitti_root, rng, kitti_limit))
    while streams:  # round robin: a partial run covers every family
        for stream in list(streams):
            case = next(stream, None)
            if case is None:
                streams.remove(stream)
                continue
            if case.cls == "pair" and len(firsts[case.family]) < 40:
                firsts[case.family].append(case)
            yield case
    yield from _cross_cases(firsts["rooms"], firsts["streets"], firsts["objects"], rng)


def label_candidates(case: VerdictCase, transforms: list[np.ndarray]) -> list[dict[str, float]]:
    """Per estimate: ``right`` (the module doc's criterion; always False without a truth) and
    its errors (NaN without a truth)."""
    from pcreg.geometry import pose_errors
    from pcreg.registration.promise import keeps_promise

    out = []
    diagonal = float(np.linalg.norm(np.ptp(case.ref, axis=0)))
    for t in transforms:
        if case.gt is None:
            out.append({"right": False, "rre_deg": np.nan, "rte": np.nan, "rmse": np.nan})
            continue
        err = pose_errors(t, case.gt, case.src)
        right = keeps_promise(err, diagonal, street=case.street)
        out.append({"right": bool(right), "rre_deg": err["rre_deg"], "rte": err["rte_m"],
                    "rmse": err["rmse_m"]})  # fmt: skip
    return out
