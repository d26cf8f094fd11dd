"""Summarise a harness run: ``python tests/cli_harness/summarize.py LOG [OUT]``.

LOG is the JSON Lines file written with ``PCREG_HARNESS_LOG=LOG pytest tests/cli_harness -m
'slow or not slow'``; the summary (cases per class, failures grouped by cause with the
command line, exit code and stderr) goes to OUT, or stdout.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness_cases import CASES, CLASSES
from harness_run import CATEGORIES

ORDER = (
    "exit-1",
    "traceback",
    "stderr-format",
    "wrong-exit-0",
    "hang",
    "memory",
    "unexpected-exit",
    "stderr-naming",
    "stderr-noise",
    "output-written",
    "bad-output",
)


def summarize(rows: list[dict]) -> str:
    latest = {r["id"]: r for r in rows}  # a case run twice: its last run counts
    total = Counter(c.klass for c in CASES)
    fast = Counter(c.klass for c in CASES if c.fast)
    ran = Counter(r["class"] for r in latest.values())
    failed = Counter(r["class"] for r in latest.values() if r["problems"])
    out = [
        f"pcreg hostile CLI harness: {len(CASES)} cases ({sum(fast.values())} fast), "
        f"{len(latest)} run, {sum(1 for r in latest.values() if r['problems'])} failing",
        "",
        f"{'class':<16}{'cases':>7}{'fast':>6}{'run':>6}{'failing':>9}",
    ]
    for klass in CLASSES:
        out.append(f"{klass:<16}{total[klass]:>7}{fast[klass]:>6}{ran[klass]:>6}{failed[klass]:>9}")
    codes = Counter(str(r["rc"]) for r in latest.values())
    out += ["", "exit codes: " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items()))]
    peak = max(latest.values(), key=lambda r: r["maxrss_mib"], default=None)
    slow = max(latest.values(), key=lambda r: r["wall_s"], default=None)
    if peak:
        out.append(f"largest peak RSS: {peak['maxrss_mib']:.0f} MiB ({peak['id']})")
        out.append(f"longest case: {slow['wall_s']:.1f} s ({slow['id']})")
    by_cat: dict[str, list[dict]] = defaultdict(list)
    for r in latest.values():
        for cat in dict.fromkeys(p[0] for p in r["problems"]):
            by_cat[cat].append(r)
    out += ["", "failing cases by cause (a case can appear under several causes):"]
    for cat in ORDER:
        cases = by_cat.get(cat, [])
        out += ["", f"== {cat}: {CATEGORIES[cat]} ({len(cases)})"]
        for r in sorted(cases, key=lambda r: r["id"]):
            msgs = "; ".join(m for c, m in r["problems"] if c == cat)
            first = (r["stderr"].strip().splitlines() or ["(empty)"])[-1]
            out += [
                f"- {r['id']}: exit {r['rc']}, {r['wall_s']:.1f} s, {r['maxrss_mib']:.0f} MiB",
                f"    $ {r['command']}",
                f"    {msgs}",
                f"    stderr (last line of {len(r['stderr'].splitlines())}): {first[:300]}",
            ]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    rows = [json.loads(line) for line in Path(argv[1]).read_text().splitlines() if line.strip()]
    text = summarize(rows)
    if len(argv) > 2:
        Path(argv[2]).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
