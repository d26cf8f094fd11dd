"""Measure the mirror check (:mod:`pcreg.registration.mirror`) on generated rooms: for each
seed, up to 4 fragment pairs of one room (the source under a random rotation) and their
mirrored sources, each registered by the default ``pcreg.register`` with the check and with
it switched off. Prints the right registrations of the pairs and the registered mirrored
sources, both ways, and each checked pair's mirror-fit ratio.

    python tools/mirror_check.py --seeds 3000500-3000507

The labelled verdict set uses seeds 3,000,000-3,000,035 for rooms; use others.
"""

from __future__ import annotations

import argparse
import logging

import numpy as np

logger = logging.getLogger("mirror_check")


def main() -> None:
    from scipy.spatial.transform import Rotation

    import pcreg
    import pcreg.registration.auto as auto
    from pcreg.data.synthetic.pairs import indoor_pairs
    from pcreg.geometry import pose_errors
    from pcreg.registration.mirror import mirrored

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="3000500-3000507", help="a range, e.g. 0-7")
    parser.add_argument("--pairs", type=int, default=4, help="pairs per room")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    lo, hi = (int(x) for x in args.seeds.split("-"))
    checked = auto._mirror_check
    rng = np.random.default_rng(0)
    tally = dict.fromkeys(("pairs", "right on", "right off", "mirrored on", "mirrored off"), 0)
    for seed in range(lo, hi + 1):
        pairs = indoor_pairs(seed, min_overlap=0.1)
        for i in rng.choice(len(pairs), min(args.pairs, len(pairs)), replace=False):
            p = pairs[int(i)]
            turn = Rotation.random(random_state=int(rng.integers(1 << 30))).as_matrix()
            src, ref = p.src.astype(np.float64) @ turn.T, p.ref.astype(np.float64)
            gt = p.transform.copy()
            gt[:3, :3] = gt[:3, :3] @ turn.T
            diagonal = float(np.linalg.norm(np.ptp(ref, axis=0)))

            def right(res, src=src, gt=gt, diagonal=diagonal) -> bool:
                err = pose_errors(res.transform, gt, src)
                close = err["rre_deg"] < 10 and err["rmse_m"] <= 0.05 * diagonal
                return bool(res.registered and close)

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


if __name__ == "__main__":
    main()
