"""The HTML report: one self-contained file (plotly inlined, no network), with the toggle,
the legend, the transform and the facts; opened in a real headless Chromium, it draws."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from pcreg.viz.report import plotly_script, report_html, write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _pair(rng, n=3000):
    ref = rng.uniform([0, 0, 0], [4, 3, 2.5], size=(n, 3))
    t = np.eye(4)
    t[:3, 3] = [0.2, 0.1, -0.05]
    return ref - t[:3, 3], ref, t


def test_report_is_self_contained_and_says_what_it_shows(rng):
    src, ref, t = _pair(rng)
    corr = (src[:50], ref[:50])
    page = report_html(
        src, ref, t, names=("a.ply", "b.ply"), correspondences=corr, radius=0.1,
        facts={"method": "geotransformer"}, title="a.ply -> b.ply",
    )  # fmt: skip
    assert not re.search(r"<script[^>]+src=", page)  # nothing fetched: plotly is inline
    assert "plotly.js (gl3d - minified) v" in page or "plotly.js v" in page  # inline
    assert page.count("* plotly.js") == 1  # one bundle, not two
    assert plotly_script() in page  # all of it
    assert page.count('"symbol":"square"') == 3  # the three clouds: squares draw fastest
    for text in ("source: a.ply (moved)", "source: a.ply (as given)", "reference: b.ply",
                 "after: source moved by T_ref_src", "before: input poses", "geotransformer",
                 "50 of 50 drawn correspondences within 10 cm under the estimate",
                 " 0.200000"):  # fmt: skip
        assert text in page, text
    # without a transform: no toggle, the clouds as given
    plain = report_html(src, ref, None)
    assert "before: input poses" not in plain and "(as given)" in plain


def test_plotly_script_is_the_vendored_gl3d_bundle_only_for_its_own_plotly_js_version(
    monkeypatch, tmp_path
):
    """The figure JSON is written for the installed plotly's plotly.js; the vendored partial
    bundle is inlined only when it is that release, else plotly's full bundle."""
    import plotly.offline

    from pcreg.viz import report

    want = plotly.offline.get_plotlyjs_version()
    vendored = report.GL3D_BUNDLE.read_text(encoding="utf-8")
    shipped = re.search(r"plotly\.js \(gl3d - minified\) v(\S+)", vendored[:400])
    assert shipped and len(vendored) > 1e6  # the real bundle, its version in its header
    assert report.plotly_script() == (
        vendored if shipped.group(1) == want else plotly.offline.get_plotlyjs()
    )
    for version, chosen in ((want, "vendored"), ("0.0.1", "full")):
        fake = tmp_path / f"{version}.js"
        fake.write_text(vendored.replace(f"v{shipped.group(1)}", f"v{version}", 1), "utf-8")
        monkeypatch.setattr(report, "GL3D_BUNDLE", fake)
        expect = fake.read_text("utf-8") if chosen == "vendored" else plotly.offline.get_plotlyjs()
        assert report.plotly_script() == expect, chosen
    monkeypatch.setattr(report, "GL3D_BUNDLE", tmp_path / "missing.js")
    assert report.plotly_script() == plotly.offline.get_plotlyjs()


def test_report_thins_large_clouds_and_stays_small(rng, tmp_path):
    big = rng.uniform(0, 20, size=(600_000, 3)) * [1, 1, 0.05]
    out = write_report(tmp_path / "r.html", big, big, np.eye(4), max_points=20_000)
    assert out.stat().st_size < 10e6
    drawn = re.search(r"source ([0-9,]+) of 600,000", out.read_text())
    assert drawn and 12_000 <= int(drawn.group(1).replace(",", "")) <= 22_000
    with pytest.raises(FileExistsError):
        write_report(tmp_path / "r.html", big[:10], big[:10], np.eye(4))


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_report_draws_in_headless_chromium_offline(rng, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    src, ref, t = _pair(rng)
    path = write_report(tmp_path / "r.html", src, ref, t, correspondences=(src[:20], ref[:20]))
    flags = ["--no-sandbox", "--disable-gpu", "--use-angle=swiftshader",
             "--enable-unsafe-swiftshader", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=flags)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        requests: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        start = time.perf_counter()
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_function(
            "() => { const g = document.querySelector('.js-plotly-plot');"
            " return g && g._fullLayout && document.querySelector('canvas'); }",
            timeout=60_000,
        )
        took = time.perf_counter() - start
        canvases = page.evaluate(
            "() => [...document.querySelectorAll('canvas')].map(c => [c.width, c.height])"
        )
        shot = page.screenshot(path=str(tmp_path / "r.png"))
        browser.close()
    assert errors == []
    assert all(url.startswith("file:") for url in requests)  # offline: nothing else asked for
    assert canvases and all(w > 100 and h > 100 for w, h in canvases)
    assert len(shot) > 10_000 and took < 60


def test_view_report_draws_a_room_lightly_and_a_street_readably(rng, tmp_path):
    """``pcreg view --report``: a room's page keeps ~2,000 points per cloud (it then draws in
    about 2 s without a GPU), clouds over 20 m across keep ~20,000, ``--report-points`` sets
    it, and a bad count is refused before anything is written."""
    from pcreg.cli import main

    def drawn(page: Path) -> int:
        found = re.search(r"source ([0-9,]+) of ([0-9,]+)", page.read_text())
        return int(found.group(1).replace(",", ""))

    room = rng.uniform([0, 0, 0], [4, 3, 2.5], size=(30_000, 3))
    street = rng.uniform([0, 0, 0], [60, 20, 3], size=(60_000, 3))
    for name, cloud in (("room", room), ("street", street)):
        np.save(tmp_path / f"{name}.npy", cloud)
    pages = {}
    for name, extra in (("room", []), ("street", []), ("room", ["--report-points", "500"])):
        out = tmp_path / f"{name}{len(extra)}.html"
        src = str(tmp_path / f"{name}.npy")
        assert main(["view", src, src, "--report", str(out), *extra]) == 0
        pages[out.stem] = drawn(out)
    assert 1_500 <= pages["room0"] <= 2_400
    assert 15_000 <= pages["street0"] <= 24_000
    assert 350 <= pages["room2"] <= 650
    for bad in ("0", "many"):
        with pytest.raises(SystemExit) as exc:
            main(["view", src, src, "--report", str(tmp_path / "x.html"), "--report-points", bad])
        assert exc.value.code == 2 and not (tmp_path / "x.html").exists()
