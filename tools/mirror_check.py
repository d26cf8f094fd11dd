"""Measure the mirror check (:mod:`pcreg.registration.mirror`) on generated rooms: for each
seed, up to 4 fragment pairs of one room (the source under a random rotation) and their
mirrored sources, each registered by the default ``pcreg.register`` with the check and with
it switched off. Prints the right registrations of the pairs and the registered mirrored
sources, both ways, and each checked pair's mirror-fit ratio.

    python tools/mirror_check.py --seeds 3000500-3000507

``--compare screen``: the check with and without its ranking screen
(:data:`~pcreg.registration.mirror.MIRROR_RANK_RATIO`) instead, on each pair, its mirrored
source and the reference's own mirror image (moved): how many outcomes differ, how many
checks the screen spared the network, and the rank ratios of the refused mirrors and of the
right pairs.

    python tools/mirror_check.py --seeds 3000612-3000623 --compare screen

The labelled verdict set uses seeds 3,000,000-3,000,035 for rooms; use others.
"""

from __future__ import annotations

import argparse
import logging

import numpy as np

logger = logging.getLogger("mirror_check")


def main() -> None:
    import pcreg
    import pcreg.registration.auto as auto
    from pcreg.geometry import pose_errors
    from pcreg.registration.mirror import mirrored
    from pcreg.registration.promise import keeps_promise

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="3000500-3000507", help="a range, e.g. 0-7")
    parser.add_argument("--pairs", type=int, default=4, help="pairs per room")
    parser.add_argument("--compare", choices=("check", "screen"), default="check")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    lo, hi = (int(x) for x in args.seeds.split("-"))
    if args.compare == "screen":
        return _compare_screen(lo, hi, args.pairs)
    checked = auto._mirror_check
    tally = dict.fromkeys(("pairs", "right on", "right off", "mirrored on", "mirrored off"), 0)
    for seed, i, src, ref, gt, diagonal, _ in _room_pairs(lo, hi, args.pairs, 0):

        def right(res, src=src, gt=gt, diagonal=diagonal) -> bool:
            err = pose_errors(res.transform, gt, src)
            return bool(res.registered and keeps_promise(err, diagonal))

        results = {}
        for on in (True, False):
            auto._mirror_check = checked if on else (lambda *a, **k: None)
            try:
                results[on] = (pcreg.register(src, ref), pcreg.register(mirrored(src), ref))
            finally:
                auto._mirror_check = checked
        tally["pairs"] += 1
        tally["right on"] += right(results[True][0])
        tally["right off"] += right(results[False][0])
        tally["mirrored on"] += results[True][1].registered
        tally["mirrored off"] += results[False][1].registered
        for kind, res in zip(("pair", "mirrored"), results[True], strict=True):
            m = res.verdict.mirror if res.verdict is not None else None
            if m and m["mirror_fit"] is not None:
                logger.info("%d %d %s: mirror fit %.2f / fit %.2f = %.2f, registered %s, "
                            "right %s",
                            seed, i, kind, m["mirror_fit"], m["fit"],
                            m["mirror_fit"] / max(m["fit"], 1e-9), res.registered,
                            kind == "pair" and right(res))  # fmt: skip
    logger.info(
        "%d pairs: right with the check %d, without %d; of their mirrored sources registered "
        "with the check %d, without %d",
        tally["pairs"], tally["right on"], tally["right off"], tally["mirrored on"],
        tally["mirrored off"],
    )  # fmt: skip


def _room_pairs(lo: int, hi: int, per_room: int, seed: int):
    """Up to ``per_room`` fragment pairs of each generated room ``lo..hi``, the source under a
    random rotation: ``(room seed, pair index, src, ref, T_ref_src, ref diagonal, rotation)``."""
    from scipy.spatial.transform import Rotation

    from pcreg.data.synthetic.pairs import indoor_pairs

    rng = np.random.default_rng(seed)
    for room in range(lo, hi + 1):
        pairs = indoor_pairs(room, min_overlap=0.1)
        for i in rng.choice(len(pairs), min(per_room, len(pairs)), replace=False):
            p = pairs[int(i)]
            turn = Rotation.random(random_state=int(rng.integers(1 << 30))).as_matrix()
            src, ref = p.src.astype(np.float64) @ turn.T, p.ref.astype(np.float64)
            gt = p.transform.copy()
            gt[:3, :3] = gt[:3, :3] @ turn.T
            yield room, int(i), src, ref, gt, float(np.linalg.norm(np.ptp(ref, axis=0))), turn


def _compare_screen(lo: int, hi: int, per_room: int) -> None:
    import pcreg
    import pcreg.registration.search as search
    from pcreg.geometry import pose_errors
    from pcreg.registration.mirror import MIRROR_RANK_RATIO, mirrored
    from pcreg.registration.promise import keeps_promise

    ranks: list[float] = []  # the last search's (source best, mirror best)
    scores = search.cube_hypothesis_scores

    def recorded(*args, **kwargs):
        out = scores(*args, **kwargs)
        ranks.append(float(out.max()))
        return out

    search.cube_hypothesis_scores = recorded
    logging.getLogger("pcreg").setLevel(logging.WARNING)
    differ = spared = checked = right = refused = unranked = 0
    refused_ratios, right_ratios = [], []
    for seed, i, src, ref, gt, diagonal, turn in _room_pairs(lo, hi, per_room, 1):
        cases = {"pair": src, "mirrored source": mirrored(src),
                 "mirrored reference": mirrored(ref) @ turn.T + 1.0}  # fmt: skip
        for kind, moving in cases.items():
            got = {}
            for ratio in (MIRROR_RANK_RATIO, 0.0):  # screened, then not
                search.MIRROR_RANK_RATIO = ratio
                ranks.clear()
                res = pcreg.register(moving, ref)
                got[ratio] = (res, list(ranks))
            search.MIRROR_RANK_RATIO = MIRROR_RANK_RATIO
            (on, _), (off, off_ranks) = got[MIRROR_RANK_RATIO], got[0.0]
            same = on.registered == off.registered and (
                on.reason.split(":")[0] == off.reason.split(":")[0]
            )
            differ += not same
            m_on, m_off = on.verdict.mirror, off.verdict.mirror
            refused += off.reason.startswith("mirror:")
            if m_off is not None and m_off["mirror_fit"] is not None:
                checked += 1
                spared += m_on is not None and m_on["mirror_fit"] is None
                unranked += len(off_ranks) != 2  # an estimate of another step, say
                if len(off_ranks) == 2:  # the search's ranking, then its mirror image's
                    ratio_of = off_ranks[1] / off_ranks[0]
                    if off.reason.startswith("mirror:"):
                        refused_ratios.append(ratio_of)
                    elif kind == "pair":
                        right_ratios.append(ratio_of)
            if kind == "pair":
                err = pose_errors(on.transform, gt, src)
                right += bool(on.registered and keeps_promise(err, diagonal))
            if not same:
                logger.info("%d %d %s: screened %s (%s), unscreened %s (%s)", seed, i,
                            kind, on.registered, on.reason[:60], off.registered,
                            off.reason[:60])  # fmt: skip
    logger.info(
        "outcomes that differ with the screen: %d; mirror refusals unscreened: %d; checks that "
        "ran the mirror image's estimate unscreened: %d (%d not through the ranking: no ratio), "
        "spared by the screen: %d; right pairs registered: %d; rank ratio of refused mirrors "
        "%s, of right pairs checked %s",
        differ, refused, checked, unranked, spared, right,
        f"{min(refused_ratios):.2f}-{max(refused_ratios):.2f}" if refused_ratios else "-",
        f"{min(right_ratios):.2f}-{max(right_ratios):.2f}" if right_ratios else "-",
    )  # fmt: skip


if __name__ == "__main__":
    main()
