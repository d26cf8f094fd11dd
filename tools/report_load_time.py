"""Time how long HTML reports (``pcreg register ... --report``) take to draw in headless Chromium.

    python tools/report_load_time.py REPORT.html... [--runs 5] [--full-bundle] [--floor]

For each file: from ``page.goto`` to the moment plotly has laid out the figure and its WebGL
canvas exists, in a fresh page of one browser (Debian's ``chromium``, software WebGL through
SwiftShader, as on a server without a GPU); the files take turns in every round, and the
median per file is printed as a Markdown table. ``--full-bundle`` also times a copy of each
file with plotly's full 4.8 MB bundle in place of the vendored gl3d one (what the report
inlined before), in the same rounds; ``--floor`` also times a report of two 20-point clouds
(what the page costs without the points).

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
    "() => { const g = document.querySelector('.js-plotly-plot');"
    " return g && g._fullLayout && document.querySelector('canvas'); }"
)


def with_full_bundle(path: Path, out_dir: Path) -> Path:
    """A copy of report ``path`` with plotly's full bundle in place of the vendored gl3d one."""
    import plotly.offline

    from pcreg.viz.report import GL3D_BUNDLE

    page, part = path.read_text("utf-8"), GL3D_BUNDLE.read_text("utf-8")
    if part not in page:
        raise SystemExit(f"{path}: does not hold the vendored gl3d bundle")
    out = out_dir / f"{path.stem}.full-bundle.html"
    out.write_text(page.replace(part, plotly.offline.get_plotlyjs(), 1), "utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--full-bundle", action="store_true")
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
        if args.full_bundle:
            files += [with_full_bundle(p, Path(tmp)) for p in files]
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
