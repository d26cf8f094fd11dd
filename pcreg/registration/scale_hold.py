"""Does an estimate made under a coarse reading of the units hold at the scale of a finer
reading that was tried before it?

``auto`` tries the readings of a pair's unit in turn (:mod:`pcreg.registration.scale`): a
160-unit cloud is a street in metres, but also a 1.6 m room in centimetres, and the second
reading runs the ``indoor`` network at its 2.5 cm voxel, which is 2.5 units of the input: eight
times coarser than the ``outdoor`` network's 0.3 m. At a coarse voxel a loose fit looks tight.
Found on real scans (``python tools/real_classes.py``, seed 0, case 26): a KITTI 04 scan
mirrored in x against its partner was refused under metres (its estimates fitted 26-33 % of
the source at the 0.3 m voxel), then registered under centimetres, fitting 86 % / 89 % at the
indoor voxel (score 0.32 against the rooms' threshold 0.30). That pose fits 24 % at 0.3 m.

A right pose explains the data at every scale the data supports: where a finer reading was
plausible (it was tried: :func:`pcreg.registration.auto._by_sampling` leaves out readings
under which the clouds are sparser than the network's voxel) and produced estimates, the
registered estimate of a coarser reading is measured at the finer reading's voxel
(:func:`~pcreg.registration.verify.verify`'s fitness), and must fit there at least
:data:`FINER_HOLD` of what that reading's own best estimate fitted, or the answer is refused.
Measured at the truth (fitness at 0.3 units against the coarse reading's 2.5): KITTI pairs
0.86-0.97 (their own scale 0.98-1.0), the TUM RGB-D pairs in centimetres 0.40 and 0.64 (their
metres reading's estimates, a 300 m street to the ``outdoor`` network, fit little); the mirrored
KITTI scan's pose 0.24 against its metres reading's best 0.33. A pair read first in its right
unit registers there and is never checked; a 3DMatch fragment in centimetres is too sparse for
the metres reading (0.3 units: every point its own voxel), so nothing is compared.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pcreg.registration.verdict import Candidate, Verdict

__all__ = ["FINER_HOLD", "finer_reading_check", "input_voxel"]

logger = logging.getLogger(__name__)

#: the share of a finer reading's best fitness that a coarser reading's registered estimate
#: must reach at the finer reading's voxel (module doc)
FINER_HOLD = 0.9


def input_voxel(cand: Candidate) -> float | None:
    """The voxel ``cand``'s measurements were made at, in the input's units (the verifier's
    radius is 1.5 voxels of the scaled pair); None where it was not verified."""
    check = cand.result.verification
    if check is None or not check.radius > 0:
        return None
    return float(check.radius) / 1.5 / float(cand.result.scale)


def finer_reading_check(
    verdict: Verdict, found: list[Candidate], src: np.ndarray, ref: np.ndarray
) -> None:
    """Turn a registered ``verdict`` to not registered where its best estimate, made under a
    reading of the units, fits the pair at the voxel of a finer reading among ``found`` (every
    estimate of the search) less than :data:`FINER_HOLD` times that reading's best estimate
    did (module doc). ``src (N, 3)``, ``ref (M, 3)``: the pair in the input's frame and units,
    as the candidates' transforms map them. A no-op where the verdict is not registered or no
    finer reading gave an estimate."""
    from pcreg.registration.verify import verify

    best = verdict.best
    if not verdict.registered or best is None:
        return
    voxel = input_voxel(best)
    if voxel is None:
        return
    finer: dict[tuple[str, float], list[Candidate]] = {}
    for cand in found:
        other = input_voxel(cand)
        if cand.result.scale != best.result.scale and other is not None and other < voxel:
            finer.setdefault((cand.result.units, float(cand.result.scale)), []).append(cand)
    for (units, _), cands in finer.items():
        fine = input_voxel(cands[0])
        own = max(float(c.features.get("fitness", 0.0)) for c in cands)
        held = verify(src, ref, best.transform, fine).fitness
        logger.info("scale hold: the %s reading's estimate fits %.3f at the %s reading's voxel "
                    "(%.3g units), whose own best fits %.3f", best.result.units, held, units,
                    fine, own)  # fmt: skip
        if held < FINER_HOLD * own:
            verdict.registered = False
            verdict.reason = (
                f"units: the estimate under the {best.result.units} reading does not hold at "
                f"the finer scale of the {units} reading tried before it: it fits "
                f"{100 * held:.0f} % of the source there, where that reading's own best "
                f"estimate fits {100 * own:.0f} % (a coarse reading fits loosely; if the "
                f"clouds are in {best.result.units}, --units {best.result.units} says so)"
            )
            return
