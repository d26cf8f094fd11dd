"""Whole scanned rooms: two stations of a terrestrial scanner, registered as a user runs them.

A station sees every wall of its room (:mod:`pcreg.data.synthetic.stations`): 600-1,900
superpoints at the ``indoor`` network's 0.4 m where an RGB-D fragment has 100-400, and a
box-shaped shell that fits another room, or the same room turned, nearly as well as the truth.
Cases, per room seed and size (x1, and x1.5 with its furniture):

* ``pair``: the room's two stations (right: under :data:`MAX_RRE_DEG` and
  :data:`MAX_RTE_SHARE` of the reference's bounding-box diagonal);
* ``unrelated``: the first station against the second of room ``seed +``
  :data:`OTHER_ROOM` (right only when refused).

``tools/whole_rooms.py`` runs them (``pcreg.register`` with no flags) and writes the table of
BENCHMARKS.md, "Whole scanned rooms".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from statistics import median

import numpy as np

__all__ = [
    "MAX_RRE_DEG",
    "MAX_RTE_SHARE",
    "OTHER_ROOM",
    "SIZES",
    "RoomCase",
    "format_table",
    "is_right",
    "room_cases",
    "summarise",
]

#: the room sizes: as generated (3.5-8 m), and 1.5x (5-12 m) with its furniture
SIZES = (1.0, 1.5)
#: the unrelated case's reference: the room this many seeds on
OTHER_ROOM = 1000
#: a right pose: rotation error under this (degrees) ...
MAX_RRE_DEG = 5.0
#: ... and translation error under this share of the reference's bounding-box diagonal
MAX_RTE_SHARE = 0.05


@dataclass(frozen=True)
class RoomCase:
    """One pair: ``src``, ``ref`` ``(N, 3)`` float64 (metres), the truth ``T_ref_src``
    ``(4, 4)`` (None: unrelated), its name, class and room size."""

    name: str
    cls: str
    size: float
    src: np.ndarray
    ref: np.ndarray
    gt: np.ndarray | None


def room_cases(first: int, rooms: int) -> Iterator[RoomCase]:
    """The ``pair`` and ``unrelated`` cases of rooms ``first`` to ``first + rooms - 1``, each
    at every size of :data:`SIZES`."""
    from pcreg.data.synthetic.stations import station_pair

    for seed in range(first, first + rooms):
        for size in SIZES:
            pair = station_pair(seed, size)
            yield RoomCase(f"room-{seed} x{size:g}", "pair", size, pair.src, pair.ref,
                           pair.transform)  # fmt: skip
            other = station_pair(seed + OTHER_ROOM, size)
            yield RoomCase(f"room-{seed}/{seed + OTHER_ROOM} x{size:g}", "unrelated", size,
                           pair.src, other.ref, None)  # fmt: skip


def is_right(case: RoomCase, transform: np.ndarray) -> bool:
    """Whether ``transform (4, 4)`` is right for ``case`` (never for an unrelated one)."""
    if case.gt is None:
        return False
    rel = np.asarray(transform, np.float64)[:3, :3].T @ case.gt[:3, :3]
    rre = np.degrees(np.arccos(np.clip((np.trace(rel) - 1) / 2, -1.0, 1.0)))
    rte = float(np.linalg.norm(np.asarray(transform)[:3, 3] - case.gt[:3, 3]))
    diagonal = float(np.linalg.norm(case.ref.max(axis=0) - case.ref.min(axis=0)))
    return bool(rre < MAX_RRE_DEG and rte < MAX_RTE_SHARE * diagonal)


def summarise(records: list[dict]) -> list[dict[str, object]]:
    """Per class and size, then in all (``cls`` ``all``): cases, registered, right and wrong
    among them, refused, and the median and largest seconds; records with an ``error`` count
    as refused."""
    groups: dict[tuple[str, float], list[dict]] = {}
    for r in records:
        groups.setdefault((r["cls"], r["size"]), []).append(r)
    groups[("all", 0.0)] = list(records)
    out = []
    for (cls, size), recs in sorted(groups.items(), key=lambda kv: (kv[0][0] == "all", kv[0])):
        reg = [r for r in recs if r.get("registered")]
        seconds = [r["seconds"] for r in recs if "seconds" in r]
        out.append({
            "cls": cls, "size": size, "cases": len(recs), "registered": len(reg),
            "right": sum(bool(r.get("right")) for r in reg),
            "wrong": sum(not r.get("right") for r in reg),
            "refused": len(recs) - len(reg),
            "median_s": median(seconds) if seconds else None,
            "max_s": max(seconds) if seconds else None,
        })  # fmt: skip
    return out


def format_table(rows: list[dict[str, object]], command: str) -> str:
    """A markdown table of :func:`summarise`'s rows, with the command that made it."""
    lines = [f"`{command}`", "",
             "| class | size | cases | registered | right | wrong | median s | max s |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        size = "all" if r["cls"] == "all" else f"x{r['size']:g}"
        med = "-" if r["median_s"] is None else f"{r['median_s']:.2f}"
        top = "-" if r["max_s"] is None else f"{r['max_s']:.2f}"
        lines.append(f"| {r['cls']} | {size} | {r['cases']} | {r['registered']} | {r['right']} "
                     f"| {r['wrong']} | {med} | {top} |")  # fmt: skip
    return "\n".join(lines) + "\n"
