"""Every class of issue #41 built from *real* scans: is ``registered`` a promise there?

The labelled verdict set (:mod:`pcreg.bench.verdict_set`) is built from generated scenes and the
KITTI training scans, disjoint from every evaluation set, because the verdict is fitted on it.
This module measures the fitted verdict where users meet it: on the real scans of
``../shared/data`` and ``../shared/train_data`` (3DMatch redkitchen fragments 0, 5 and 6, the
TUM RGB-D depth pairs, the Stanford bunny and dragon range scans, KITTI sequence 00 and the
KITTI training scans), each case under a seeded random motion, each judged by
:func:`pcreg.registration.promise.keeps_promise`. Nothing here is fitted on.

Families (``family``): ``rooms`` (3DMatch, TUM), ``objects`` (bunny, dragon), ``streets``
(KITTI). Classes (``cls``), each a case per round and family:

* ``pair``: a true pair;
* ``chunk``: the first or last 5-50 % of the source's points as stored;
* ``crop``: the source cut by a random plane, 15-60 % of it kept;
* ``sparse``: every 10th-300th source point;
* ``low-overlap``: the source and the reference cut on either side of one random plane
  (the truth's frame), overlapping in a band of about 30 % of the points;
* ``narrow-fov`` (streets): a 40-90 deg wedge of the source's sweep within 60 m, every 1st-3rd
  point: a small sensor beside the roof one;
* ``mirror``: the source mirrored in x against its reference (no rigid answer);
* ``mirror-self``: the source mirrored in y against itself;
* ``disjoint``: two parts of the reference along its longest axis, the 20 % of its points
  between them left out;
* ``unrelated``: a scan of another scene of the family;
* ``cross``: a scan of another family, rescaled to the reference's size.

The negatives (``gt`` None) are right only when refused. Streets move about the vertical in
half the draws, as a car's scans do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["CLASSES", "ClassCase", "format_table", "judge", "real_class_cases", "summarise"]

#: the classes in the order of the table
CLASSES = ("pair", "chunk", "crop", "sparse", "low-overlap", "narrow-fov", "mirror",
           "mirror-self", "disjoint", "unrelated", "cross")  # fmt: skip


@dataclass
class ClassCase:
    """One pair: ``ref ≈ gt @ src`` (``gt`` None: no rigid answer; every registration wrong).
    Clouds ``(N, 3)`` float64 in metres."""

    family: str
    cls: str
    name: str
    src: np.ndarray
    ref: np.ndarray
    gt: np.ndarray | None
    street: bool = False


Scan = tuple[str, np.ndarray, np.ndarray, np.ndarray]  # (name, src, ref, T_ref_src)


def _bin(path: Path) -> np.ndarray:
    return np.fromfile(path, np.float32).reshape(-1, 4)[:, :3].astype(np.float64)


def _sources(shared_data: Path) -> dict[str, list[Scan]]:
    """The real pairs per family that exist under ``shared_data`` and its sibling
    ``train_data`` (empty lists where none)."""
    from pcreg.bench.real_pairs import real_pairs
    from pcreg.bench.zero_shot import _stanford, _tum
    from pcreg.io import read_points

    fams: dict[str, list[Scan]] = {"rooms": [], "objects": [], "streets": []}
    for pair in real_pairs(shared_data):
        fam = "rooms" if pair.setting == "indoor" else "streets"
        src, ref = read_points(pair.src), read_points(pair.ref)
        # the shared KITTI pairs are of sequence 00, as the training scans' "KITTI 00 ...":
        # one scene, never each other's unrelated scan
        name = pair.name.replace("KITTI ", "KITTI 00 ") if fam == "streets" else pair.name
        fams[fam].append((name, src, ref, np.asarray(pair.gt, np.float64)))
    by_name = {name: (s, r, gt) for name, s, r, gt in fams["rooms"]}
    if "3DMatch 0<-6" in by_name and "3DMatch 0<-5" in by_name:  # 5<-6 through fragment 0
        s6, _, t06 = by_name["3DMatch 0<-6"]
        s5, _, t05 = by_name["3DMatch 0<-5"]
        fams["rooms"].append(("3DMatch 5<-6", s6, s5, np.linalg.inv(t05) @ t06))
    train = shared_data.parent / "train_data"
    if (train / "tum_fr1xyz_depth_pairs").is_dir():
        fams["rooms"] += [(f"TUM {n}", s, r, gt) for n, s, r, gt in
                          _tum(train / "tum_fr1xyz_depth_pairs")]  # fmt: skip
    for folder, label in (("stanford_bunny_range_scans", "bunny"),
                          ("stanford_dragon_stand_range_scans", "dragon")):  # fmt: skip
        if (train / folder).is_dir():
            fams["objects"] += [(f"{label} {n}", s, r, gt) for n, s, r, gt in
                                _stanford(train / folder, 10)]  # fmt: skip
    kitti = train / "kitti_seq00-07_semantickitti_mini"
    if (kitti / "pairs.json").is_file():
        for p in json.loads((kitti / "pairs.json").read_text())["pairs"][::4]:
            fams["streets"].append((f"KITTI {p['seq']} {p['ref_frame']}<-{p['src_frame']}",
                                    _bin(kitti / p["src"]), _bin(kitti / p["ref"]),
                                    np.asarray(p["T_ref_src"], np.float64)))  # fmt: skip
    return fams


def _scene(name: str) -> str:
    """The scene of a pair's name (``"KITTI 03 6<-3"`` -> ``"KITTI 03"``; 3DMatch and TUM pairs
    of one dataset are one scene each)."""
    parts = name.split()
    return " ".join(parts[:2]) if parts[0] == "KITTI" and len(parts) > 2 else parts[0]


def real_class_cases(shared_data: Path, rounds: int, seed: int = 0) -> Iterator[ClassCase]:
    """``rounds`` cases of every class and family whose data exist (module doc), seeded."""
    from pcreg.bench.zero_shot import _motion
    from pcreg.registration.checks import cloud_extent

    fams = _sources(shared_data)
    rng = np.random.default_rng(seed)

    def moved(fam, cls, name, src, ref, gt, street, yaw) -> ClassCase:
        m = _motion(rng, cloud_extent(ref), yaw)
        src = src @ m[:3, :3].T + m[:3, 3]
        return ClassCase(fam, cls, name, src, ref, None if gt is None else gt @ np.linalg.inv(m),
                         street)  # fmt: skip

    def plane_side(cloud: np.ndarray, normal: np.ndarray, share: float) -> np.ndarray:
        along = cloud @ normal
        return along <= np.quantile(along, share)

    others = {"rooms": "streets", "streets": "rooms", "objects": "rooms"}
    for _ in range(rounds):
        for fam, pool in fams.items():
            if not pool:
                continue
            street = fam == "streets"
            name, src, ref, gt = pool[int(rng.integers(len(pool)))]
            yaw = street and rng.random() < 0.5

            def case(cls, s, r, truth, label=name, yaw=yaw, fam=fam, street=street):
                return moved(fam, cls, label, s, r, truth, street, yaw)

            yield case("pair", src, ref, gt)
            share = rng.uniform(0.05, 0.5)
            k = max(1, int(len(src) * share))
            yield case("chunk", src[:k] if rng.random() < 0.5 else src[-k:], ref, gt)
            normal = rng.normal(size=3)
            normal /= np.linalg.norm(normal)
            yield case("crop", src[plane_side(src, normal, rng.uniform(0.15, 0.6))], ref, gt)
            yield case("sparse", src[:: int(rng.choice([10, 30, 100, 300]))], ref, gt)
            # both cut by one plane in the reference's frame, overlapping in a band
            at = rng.uniform(0.3, 0.6)
            in_ref = src @ gt[:3, :3].T + gt[:3, 3]
            keep_src = plane_side(in_ref, normal, at + 0.15)
            keep_ref = ~plane_side(ref, normal, at - 0.15)
            yield case("low-overlap", src[keep_src], ref[keep_ref], gt)
            if street:
                fov = rng.uniform(40, 90)
                facing = rng.uniform(-180, 180)
                az = np.degrees(np.arctan2(src[:, 1], src[:, 0]))
                off = (az - facing + 180) % 360 - 180
                wedge = (np.abs(off) < fov / 2) & (np.linalg.norm(src[:, :2], axis=1) < 60)
                stride = int(rng.integers(1, 4))
                yield case("narrow-fov", src[wedge][::stride], ref, gt)
            yield case("mirror", src * np.array([-1.0, 1.0, 1.0]), ref, None)
            yield case("mirror-self", src * np.array([1.0, -1.0, 1.0]), src, None)
            axis = int(np.argmax(np.ptp(ref, axis=0)))
            lo, hi = np.quantile(ref[:, axis], [0.4, 0.6])
            yield case("disjoint", ref[ref[:, axis] < lo], ref[ref[:, axis] > hi], None)
            apart = [p for p in pool if _scene(p[0]) != _scene(name)]
            if apart:
                other = apart[int(rng.integers(len(apart)))]
                yield case("unrelated", other[1], ref, None, f"{name} vs {other[0]}")
            alien = fams[others[fam]]
            if alien:
                other = alien[int(rng.integers(len(alien)))]
                size = cloud_extent(ref) / max(cloud_extent(other[1]), 1e-12)
                yield case("cross", other[1] * size, ref, None, f"{name} vs {other[0]} x{size:.3g}")


def judge(case: ClassCase, transform: np.ndarray | None, registered: bool) -> dict[str, object]:
    """One case's outcome: ``registered``, ``right`` (the transform keeps the promise: the
    zero-shot criterion, streets by their centre's displacement; a negative is never right),
    ``wrong`` (registered and not right), and the errors where a truth exists."""
    from pcreg.geometry.metrics import pose_errors
    from pcreg.registration.promise import keeps_promise

    out: dict[str, object] = {"family": case.family, "cls": case.cls, "name": case.name,
                              "points": len(case.src), "registered": bool(registered)}  # fmt: skip
    right = False
    if case.gt is not None and transform is not None and np.isfinite(transform).all():
        err = pose_errors(transform, case.gt, case.src)
        centre = case.src.mean(axis=0)
        moved = transform[:3, :3] @ centre + transform[:3, 3]
        shift = float(np.linalg.norm(moved - case.gt[:3, :3] @ centre - case.gt[:3, 3]))
        diagonal = float(np.linalg.norm(np.ptp(case.ref, axis=0)))
        right = keeps_promise(err, diagonal, street=case.street, shift=shift)
        out.update(rre_deg=round(float(err["rre_deg"]), 3), shift=round(shift, 4))
    out.update(right=bool(right), wrong=bool(registered and not right))
    return out


def summarise(records: list[dict]) -> list[dict[str, object]]:
    """Per family and class (the order of :data:`CLASSES`): cases, registered, wrong but
    registered, right pose found (registered or not), right and registered."""
    rows: dict[tuple[str, str], dict[str, object]] = {}
    for r in records:
        row = rows.setdefault((str(r["family"]), str(r["cls"])),
                              {"family": r["family"], "cls": r["cls"], "cases": 0,
                               "registered": 0, "wrong": 0, "right_pose": 0,
                               "right_registered": 0})  # fmt: skip
        row["cases"] += 1
        row["registered"] += bool(r["registered"])
        row["wrong"] += bool(r["wrong"])
        row["right_pose"] += bool(r["right"])
        row["right_registered"] += bool(r["right"] and r["registered"])
    order = {c: i for i, c in enumerate(CLASSES)}
    return sorted(rows.values(), key=lambda r: (r["family"], order.get(r["cls"], 99)))


def format_table(rows: list[dict[str, object]], command: str) -> str:
    """Markdown: one line per family and class, then one per family."""
    lines = [f"Command: `{command}`", "",
             "| family | class | cases | registered | wrong but registered | right pose found "
             "| right and registered |", "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r['family']} | {r['cls']} | {r['cases']} | {r['registered']} | "
                     f"{r['wrong']} | {r['right_pose']} | {r['right_registered']} |")  # fmt: skip
    totals: dict[str, list[int]] = {}
    for r in rows:
        t = totals.setdefault(str(r["family"]), [0, 0, 0])
        t[0] += int(r["cases"])
        t[1] += int(r["registered"])
        t[2] += int(r["wrong"])
    lines += ["", "| family | cases | registered | wrong but registered | precision |",
              "|---|---:|---:|---:|---:|"]  # fmt: skip
    for fam, (n, reg, wrong) in sorted(totals.items()):
        prec = f"{1 - wrong / reg:.3f}" if reg else "-"
        lines.append(f"| {fam} | {n} | {reg} | {wrong} | {prec} |")
    return "\n".join(lines) + "\n"
