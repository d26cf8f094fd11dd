"""What ``registered`` promises, and whether an answer keeps it against a ground truth.

``registered: true`` promises a transform within :data:`RIGHT_DEG` of rotation and an RMSE of
the source's points within :data:`RIGHT_DIAGONAL` of the reference's bounding-box diagonal; for
streets (the outdoor setting) KITTI's criterion, :data:`STREET_RIGHT_DEG` and
:data:`STREET_RIGHT_M` (README, "What `registered` promises"). The verdict set's labels
(:mod:`pcreg.bench.verdict_set`), the zero-shot benchmark's successes, ``pcreg register
--gt``, the demo and :meth:`~pcreg.registration.result.RegistrationResult.against` all judge
by :func:`keeps_promise`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pcreg._text import format_length
from pcreg.registration.verdict import pose_distance

__all__ = [
    "RIGHT_DEG",
    "RIGHT_DIAGONAL",
    "STREET_RIGHT_DEG",
    "STREET_RIGHT_M",
    "UNIT_FACTORS",
    "against_truth",
    "keeps_promise",
    "promise_text",
]

#: a :class:`~pcreg.registration.result.RegistrationResult` (typed Any: the result module
#: imports this one)
RegistrationResult = Any

#: the promise (module doc): rotation error and RMSE as a share of the diagonal; for streets,
#: rotation error and translation error in metres (KITTI's)
RIGHT_DEG = 10.0
RIGHT_DIAGONAL = 0.05
STREET_RIGHT_DEG = 2.0
STREET_RIGHT_M = 0.3


def keeps_promise(
    errors: dict[str, float], diagonal: float, street: bool = False, shift: float | None = None
) -> bool:
    """Whether an estimate's ``errors`` (``rre_deg``, ``rte_m``, ``rmse_m``:
    :func:`pcreg.geometry.pose_errors`) keep the promise of ``registered``: ``diagonal``, the
    reference's bounding-box diagonal, in the unit of ``rmse_m``; ``street``: the KITTI
    criterion, its translation error ``shift`` where given (metres: the displacement of the
    source's centre, for clouds whose origin lies far from them, such as georeferenced ones),
    else ``rte_m`` (the error at the origin: KITTI's scans are centred on their sensor)."""
    if street:
        moved = errors["rte_m"] if shift is None else shift
        return errors["rre_deg"] < STREET_RIGHT_DEG and moved < STREET_RIGHT_M
    return errors["rre_deg"] < RIGHT_DEG and errors["rmse_m"] <= RIGHT_DIAGONAL * diagonal


def against_truth(
    result: RegistrationResult,
    gt: np.ndarray,
    errors: dict[str, float],
    src: np.ndarray,
    ref: np.ndarray,
) -> dict[str, object]:
    """``right`` (:func:`keeps_promise` of ``result``'s ``errors`` against ``gt (4, 4)``, both
    clouds ``(N, 3)`` in the input's units; streets: the outdoor setting, not an object, their
    translation error at the source's centre) and ``right_criterion``, each condition with its
    value and whether it holds (:func:`promise_text`): what ``pcreg register --gt``, the demo
    and :meth:`~pcreg.registration.result.RegistrationResult.against` report. Also for a
    refused pair's best estimate: whether it would have been right."""
    street = result.setting == "outdoor" and not result.object
    metres = result.metres_per_unit
    diagonal = float(np.linalg.norm(np.ptp(ref, axis=0))) * metres
    centre = np.asarray(src).mean(axis=0)
    shift = pose_distance(result.transform, gt, centre)[1] * metres
    right = keeps_promise(errors, diagonal, street, shift)
    text = promise_text(street, diagonal, errors, shift)
    if not right and errors.get("rre_deg") is not None:
        for factor in UNIT_FACTORS:  # a --gt written in metres for clouds in millimetres
            scaled = np.array(gt, np.float64)
            scaled[:3, 3] *= factor
            moved = {**errors, "rmse_m": _rmse(result.transform, scaled, src) * metres}
            moved_shift = pose_distance(result.transform, scaled, centre)[1] * metres
            if keeps_promise(moved, diagonal, street, moved_shift):
                text += (
                    f"; with --gt's translation x{factor:g} it would be right: is --gt in "
                    "other units than the clouds? It must be in theirs"
                )
                break
    return {"right": right, "right_criterion": text}


#: the factors between the units a --gt and the clouds may be written in (mm, cm, m)
UNIT_FACTORS = (1000.0, 0.001, 100.0, 0.01, 10.0, 0.1)


def _rmse(a: np.ndarray, b: np.ndarray, points: np.ndarray) -> float:
    """RMSE between ``points (N, 3)`` moved by ``a`` and by ``b`` (4, 4), an even stride of at
    most 20,000 of them (numpy: the command line's lean path imports no torch)."""
    p = np.asarray(points, np.float64)[:: max(1, len(points) // 20_000)]
    diff = p @ (a[:3, :3] - b[:3, :3]).T + (a[:3, 3] - b[:3, 3])
    return float(np.sqrt((diff**2).sum(axis=1).mean()))


def promise_text(
    street: bool = False,
    diagonal: float | None = None,
    errors: dict[str, float] | None = None,
    shift: float | None = None,
) -> str:
    """:func:`keeps_promise`'s criterion in words; with the reference's ``diagonal``
    (metres), the RMSE's limit in metres; with ``errors`` (and a street's ``shift``), each
    condition's value and whether it holds: ``RRE 29.68 deg < 10 deg: no; RMSE 80.76 cm <=
    22.26 cm (5% of the reference's diagonal): no`` (lengths in mm, cm, m or km by size)."""
    share = f"{RIGHT_DIAGONAL:.0%} of the reference's diagonal"
    if street:
        conditions = [
            ("RRE", "rre_deg", " deg", "<", STREET_RIGHT_DEG, ""),
            ("the source's centre moved", "shift", " m", "<", STREET_RIGHT_M, " (KITTI's RTE)"),
        ]
    else:
        limit = None if diagonal is None else RIGHT_DIAGONAL * diagonal
        conditions = [
            ("RRE", "rre_deg", " deg", "<", RIGHT_DEG, ""),
            ("RMSE", "rmse_m", " m", "<=", limit, f" ({share})" if limit is not None else ""),
        ]
    values = dict(errors or {})
    if shift is not None:
        values["shift"] = shift
    elif "rte_m" in values:
        values["shift"] = values["rte_m"]

    def text(value: float, unit: str) -> str:  # lengths in the unit a person reads
        return format_length(value, 4) if unit == " m" else f"{value:.4g}{unit}"

    parts = []
    for name, key, unit, op, limit, note in conditions:
        bound = share if limit is None else f"{text(limit, unit)}{note}"
        if key in values and values[key] is not None:
            holds = values[key] < limit if op == "<" else values[key] <= limit
            parts.append(
                f"{name} {text(values[key], unit)} {op} {bound}: {'yes' if holds else 'no'}"
            )
        else:
            parts.append(f"{name} {op} {bound}")
    return "; ".join(parts) if errors else " and ".join(parts)
