"""Every class of the labelled verdict set on fresh generated rooms, registered as a user runs
it (``pcreg.register`` with no flags): how many register, how many of those are wrong, and what
the bare-planes rule (:data:`pcreg.registration.verdict.MIN_DETAIL`) refused.

    python tools/fresh_rooms.py OUT.jsonl --first 3000980 --rooms 16

One JSON line per case is appended to ``OUT.jsonl``; a run that stops is continued by the same
command (cases whose name is recorded are skipped; a file of another ``--first`` is refused).
The cases: :func:`pcreg.bench.verdict_set.fresh_room_cases`. "Before" in the table counts each
case the rule refused as the answer the search gave there (it stopped at that candidate before
the rule existed); mirrored sources that a rigid motion lays :data:`~pcreg.bench.verdict_set.
CONGRUENT` onto their original are counted apart, as the labelled set leaves them out.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pcreg.bench.records import room_run  # noqa: E402
from pcreg.bench.verdict_set import CONGRUENT  # noqa: E402

#: the start of the rule's refusal reason (:func:`pcreg.registration.verdict._decide`)
RULE = "ambiguous: the clouds meet only on a floor and walls"


def summarise(records: list[dict]) -> list[dict[str, object]]:
    """Per class and in all (the last row, class ``all``): cases, registered, wrong among
    them, the right and wrong answers the bare-planes rule refused, and the same counts
    before the rule; congruent mirrors (a rigid answer exists) left out."""
    rows: dict[str, dict[str, int]] = {}
    for r in records:
        if "error" in r or (r["cls"] == "mirror" and (r.get("congruence") or 0.0) >= CONGRUENT):
            continue
        row = rows.setdefault(r["cls"], dict.fromkeys(
            ("cases", "registered", "wrong", "rule_right", "rule_wrong"), 0))  # fmt: skip
        row["cases"] += 1
        row["registered"] += r["registered"]
        row["wrong"] += r["registered"] and not r["right"]
        ruled = (r.get("reason") or "").startswith(RULE)
        row["rule_right"] += ruled and r["right"]
        row["rule_wrong"] += ruled and not r["right"]
    total = {k: sum(row[k] for row in rows.values()) for k in
             ("cases", "registered", "wrong", "rule_right", "rule_wrong")}  # fmt: skip
    out = []
    for cls, row in [*sorted(rows.items()), ("all", total)]:
        before = row["registered"] + row["rule_right"] + row["rule_wrong"]
        out.append({"cls": cls, **row, "registered_before": before,
                    "wrong_before": row["wrong"] + row["rule_wrong"]})  # fmt: skip
    return out


def _precision(registered: int, wrong: int) -> str:
    return f"{100 * (registered - wrong) / registered:.1f} %" if registered else "-"


def format_table(rows: list[dict[str, object]], command: str) -> str:
    """A markdown table of :func:`summarise`'s rows, with the command that made it."""
    lines = [f"`{command}` (mirrors a rigid motion lays {CONGRUENT:.0%} onto their original "
             "left out)", "",
             "| class | cases | registered, before / after | wrong, before / after | "
             "precision, before / after | right refused by the rule |",
             "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['cls']} | {r['cases']} | {r['registered_before']} / {r['registered']} | "
            f"{r['wrong_before']} / {r['wrong']} | "
            f"{_precision(r['registered_before'], r['wrong_before'])} / "
            f"{_precision(r['registered'], r['wrong'])} | {r['rule_right']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args, done = room_run(__doc__, 3_000_980, 16, argv)
    logging.basicConfig(level=logging.WARNING)
    if not args.table_only:
        import numpy as np
        from tqdm import tqdm

        import pcreg
        from pcreg.bench.verdict_set import fresh_room_cases, label_candidates

        have = {r["name"] for r in done}
        with args.out.open("a") as fh:
            for case in tqdm(fresh_room_cases(args.first, args.rooms), desc="cases"):
                if case.name in have:
                    continue
                t0 = time.perf_counter()
                rec = {"first": args.first, "name": case.name, "cls": case.cls,
                       "congruence": case.congruence}  # fmt: skip
                try:
                    res = pcreg.register(case.src, case.ref)
                except Exception as err:  # a refused input is a record too
                    rec["error"] = f"{type(err).__name__}: {err}"[:200]
                else:
                    lab = label_candidates(case, [np.asarray(res.transform)])[0]
                    rec.update(registered=bool(res.registered), right=bool(lab["right"]),
                               reason=res.reason,
                               seconds=round(time.perf_counter() - t0, 3))  # fmt: skip
                fh.write(json.dumps(rec, default=float) + "\n")
                fh.flush()
                done.append(rec)
    command = f"python tools/fresh_rooms.py OUT --first {args.first} --rooms {args.rooms}"
    print(format_table(summarise(done), command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
