"""Time how long HTML reports (``pcreg register ... --report``) take to draw in headless Chromium.

    python tools/report_load_time.py REPORT.html... [--runs 5] [--floor]

For each file: from ``page.goto`` to the first frame drawn (the viewer sets ``<body
data-drawn="1">``; a report written by pcreg before it moved to three.js counts when plotly
has laid out its figure and made its WebGL canvas), in a fresh page of one browser (Debian's
``chromium``, software WebGL through SwiftShader, as on a server without a GPU, viewport
1300x1000); the files take turns in every round, and the median per file is printed as a
Markdown table. ``--floor`` also times a report of two 20-point clouds (what the page costs
without the points).

Needs ``playwright`` (the ``dev`` extra) and ``/usr/bin/chromium`` (``scripts/system_deps.sh
--test``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ["--no-sandbox", "--disable-gpu", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run"]  # fmt: skip
DRAWN = (
    "() => { if (document.body && document.body.dataset.drawn === '1') return true;"
    " const g = document.querySelector('.js-plotly-plot');"
    " return !!(g && g._fullLayout && document.querySelector('canvas')); }"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--floor", action="store_true")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium not found (scripts/system_deps.sh --test installs it)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        files = [p.resolve() for p in args.reports]
        if args.floor:
            import numpy as np

            from pcreg.viz.report import write_report

            pts = np.random.default_rng(0).uniform(0, 1, (20, 3))
            files.append(write_report(Path(tmp) / "floor-20-points.html", pts, pts, np.eye(4)))
        times: dict[Path, list[float]] = {f: [] for f in files}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=FLAGS)
            for _ in range(args.runs):
                for f in files:
                    page = browser.new_page(viewport={"width": 1300, "height": 1000})
                    errors: list[str] = []
                    page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                    start = time.perf_counter()
                    page.goto(f.as_uri(), wait_until="load")
                    page.wait_for_function(DRAWN, timeout=120_000)
                    times[f].append(time.perf_counter() - start)
                    page.close()
                    if errors:
                        print(f"{f}: {errors[0]}", file=sys.stderr)
                        return 1
            browser.close()
        print("| report | MB | load s (median) | runs |")
        print("|---|---:|---:|---|")
        for f, t in times.items():
            runs = ", ".join(f"{x:.2f}" for x in t)
            print(
                f"| {f.name} | {f.stat().st_size / 1e6:.1f} | {statistics.median(t):.2f} | {runs} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
