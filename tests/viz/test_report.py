"""The HTML report: one self-contained file (three.js and the viewer inlined, no network) whose
data holds the clouds where they belong (the source moved by the estimate, the input poses),
the correspondences split by agreement, the legend's names and the facts; opened in a real
headless Chromium, it draws both clouds in their colours and its buttons switch the poses."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from pcreg.viz.report import THREE_BUNDLE, nice_cell, report_html, viewer_script, write_report
from pcreg.viz.style import FAR_COLOR, INLIER_COLOR, REFERENCE_COLOR, SOURCE_COLOR, hex_color

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--no-sandbox", "--disable-gpu", "--use-angle=swiftshader",
         "--enable-unsafe-swiftshader", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def _pair(rng, n=3000, offset=(0.0, 0.0, 0.0)):
    ref = rng.uniform([0, 0, 0], [4, 3, 2.5], size=(n, 3)) + offset
    t = np.eye(4)
    t[:3, :3] = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # 90 deg about z
    t[:3, 3] = [0.2, 0.1, -0.05]
    src = (ref - t[:3, 3]) @ t[:3, :3]  # so that T @ src = ref
    return src, ref, t


def _data(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="pcreg-data">(.*?)</script>', page, re.S)
    assert found, "no data block"
    return json.loads(found.group(1))


def _xyz(layer: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(layer["xyz"]), "<f4").reshape(-1, 3).astype(np.float64)


def _layers(data: dict) -> dict[str, dict]:
    return {layer["name"]: layer for layer in data["layers"]}


def test_report_is_self_contained_and_holds_each_layer_where_it_belongs(rng):
    src, ref, t = _pair(rng)
    corr_src, corr_ref = src[:50].copy(), ref[:50].copy()
    corr_ref[:10] += [0.5, 0.0, 0.0]  # ten correspondences 50 cm off
    page = report_html(
        src, ref, t, names=("a.ply", "b.ply"), correspondences=(corr_src, corr_ref), radius=0.1,
        facts={"method": "geotransformer"}, title="a.ply -> b.ply",
    )  # fmt: skip
    assert not re.search(r"<script[^>]+src=", page)  # nothing fetched: all inline
    assert page.count("three.js r187 (npm three@0.187.0") == 1  # the bundle, once
    assert THREE_BUNDLE.read_text("utf-8") in page and viewer_script() in page  # all of both
    for text in ("after: source moved by T_ref_src", "before: input poses", "geotransformer",
                 "40 of 50 drawn correspondences within 10 cm under the estimate",
                 " 0.200000", "a.ply -&gt; b.ply"):  # fmt: skip
        assert text in page, text
    data = _data(page)
    layers = _layers(data)
    assert data["states"] == ["after", "before"]
    near_name = "correspondence within 10 cm under the estimate (40)"
    far_name = "correspondence, farther (10)"
    assert set(layers) == {"reference: b.ply", "source: a.ply (moved)", "source: a.ply (as given)",
                           near_name, far_name}  # fmt: skip
    assert [layer["group"] for layer in data["layers"]] == [
        "reference", "source", "source", "near", "far"
    ]  # fmt: skip
    ref_layer = layers["reference: b.ply"]
    origin = (ref.min(0) + ref.max(0)) / 2
    assert ref_layer["states"] == ["after", "before"] and ref_layer["kind"] == "points"
    np.testing.assert_allclose(_xyz(ref_layer) + origin, ref, atol=1e-5)
    moved = layers["source: a.ply (moved)"]
    assert moved["states"] == ["after"] and moved["color"] == "#f28c0d"
    np.testing.assert_allclose(_xyz(moved) + origin, ref, atol=1e-5)  # T @ src lands on ref
    given = layers["source: a.ply (as given)"]
    assert given["states"] == ["before"]
    np.testing.assert_allclose(_xyz(given) + origin, src, atol=1e-5)
    near, far = layers[near_name], layers[far_name]
    assert near["kind"] == far["kind"] == "lines" and near["states"] == ["after"]
    assert (near["color"], far["color"]) == (hex_color(INLIER_COLOR), hex_color(FAR_COLOR))
    near_xyz, far_xyz = _xyz(near) + origin, _xyz(far) + origin
    assert len(near_xyz) == 2 * 40 and len(far_xyz) == 2 * 10  # a start and an end each
    np.testing.assert_allclose(far_xyz[1::2], corr_ref[:10], atol=1e-5)  # ends on the reference
    np.testing.assert_allclose(far_xyz[0::2], corr_ref[:10] - [0.5, 0, 0], atol=1e-5)
    # without a transform: one pose, no buttons, the clouds as given
    plain = report_html(src, ref, None)
    data = _data(plain)
    assert "before: input poses" not in plain and data["states"] == ["given"]
    assert [layer["states"] for layer in data["layers"]] == [["given"], ["given"]]


def test_report_keeps_millimetres_of_georeferenced_coordinates(rng):
    """UTM-like coordinates (millions of metres) in float32 would lose decimetres; the page holds
    them relative to the reference's centre."""
    site = np.array([512_345.0, 5_412_345.0, 310.0])
    ref = rng.uniform([0, 0, 0], [40, 30, 5], size=(500, 3)) + site
    t = np.eye(4)
    c, s = np.cos(np.radians(10)), np.sin(np.radians(10))
    t[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    t[:3, 3] = site - t[:3, :3] @ site + [1.5, -0.5, 0.1]  # 10 deg about the site, 1.6 m
    src = (ref - t[:3, 3]) @ t[:3, :3]
    layers = list(_layers(_data(report_html(src, ref, t))).values())
    origin = (ref.min(0) + ref.max(0)) / 2
    np.testing.assert_allclose(_xyz(layers[0]) + origin, ref, atol=1e-3, rtol=0)
    np.testing.assert_allclose(_xyz(layers[1]) + origin, ref, atol=1e-3, rtol=0)  # moved
    np.testing.assert_allclose(_xyz(layers[2]) + origin, src, atol=1e-3, rtol=0)  # as given


def test_report_judges_correspondences_by_the_truth_when_given_and_spreads_the_drawn_ones(rng):
    """With ``gt`` the lines are judged by the truth (a wrong estimate's lines are "farther",
    however short they look), and over ``max_lines`` the drawn ones span the whole list."""
    src, ref, t = _pair(rng)
    wrong = t.copy()
    wrong[:3, 3] += [1.0, 0.0, 0.0]  # the estimate 1 m off
    corr = (src[:1000], ref[:1000])
    data = _data(report_html(src, ref, wrong, correspondences=corr, gt=t, max_lines=400))
    layers = _layers(data)
    assert "correspondence within 10 cm under the truth (400)" in layers
    assert not any("farther" in name for name in layers)  # no empty layer
    lines = _xyz(layers["correspondence within 10 cm under the truth (400)"])
    origin = (ref.min(0) + ref.max(0)) / 2
    ends = lines[1::2] + origin
    np.testing.assert_allclose(ends[[0, -1]], ref[[0, 999]], atol=1e-5)  # first and last kept
    np.testing.assert_allclose(lines[0::2] + origin, ends + np.array([1.0, 0, 0]), atol=1e-5)
    page = report_html(src, ref, wrong, correspondences=corr, max_lines=400)  # no truth
    assert "correspondence, farther (400)" in _layers(_data(page))


def test_report_data_cannot_close_its_script_element(rng):
    """File names go into the data block; "</script>" or "<!--<script>" in one must not end
    or extend it (the browser test below draws such a page)."""
    src, ref, t = _pair(rng, 50)
    names = ("</script><!--<script>a.npy", "b&<!-- c.npy")
    page = report_html(src, ref, t, names=names, title=" -> ".join(names))
    block = re.search(r'id="pcreg-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in block and ">" not in block
    assert _layers(json.loads(block)).keys() >= {
        f"source: {names[0]} (moved)",
        f"reference: {names[1]}",
    }
    assert "&lt;/script&gt;&lt;!--&lt;script&gt;a.npy" in page  # the title, escaped


@pytest.mark.parametrize(
    "span, cell", [(4.3, 0.5), (0.37, 0.05), (100.0, 10.0), (120.0, 20.0), (10.0, 1.0)]
)
def test_nice_cell_is_1_2_or_5_and_fits_ten_cells(span, cell):
    assert nice_cell(span) == pytest.approx(cell)


def test_report_grid_lies_under_the_clouds_and_covers_them(rng):
    """The scale grid: in the plane of the scene's two long axes, at its low end along the
    third (a z-up room's floor), wide enough for every point, and labelled with its cell."""
    room = rng.uniform([0, 0, 0], [6, 4, 1.0], size=(4000, 3))
    data = _data(report_html(room, room, np.eye(4)))
    grid = data["grid"]
    origin = (room.min(0) + room.max(0)) / 2
    assert grid["label"] == "1 m" and grid["size"] == pytest.approx(grid["cells"] * 1.0)
    normal = np.array(grid["n"])
    assert abs(normal[2]) > 0.99 and normal[2] > 0  # the thin axis, pointing up
    centre = np.array(grid["centre"]) + origin
    height = (room - centre) @ normal
    assert height.min() == pytest.approx(0.0, abs=1e-6)  # the floor: no point under it
    for axis in (np.array(grid["u"]), np.array(grid["v"])):
        reach = np.abs((room - centre) @ axis).max()
        assert reach <= grid["size"] / 2


def test_report_thins_large_clouds_and_stays_small(rng, tmp_path):
    big = rng.uniform(0, 20, size=(600_000, 3)) * [1, 1, 0.05]
    out = write_report(tmp_path / "r.html", big, big, np.eye(4), max_points=20_000)
    assert out.stat().st_size < 10e6
    drawn = re.search(r"source ([0-9,]+) of 600,000", out.read_text())
    assert drawn and 12_000 <= int(drawn.group(1).replace(",", "")) <= 22_000
    with pytest.raises(FileExistsError):
        write_report(tmp_path / "r.html", big[:10], big[:10], np.eye(4))


def _colour_pixels(
    png: bytes, rgb: tuple[float, float, float], box: dict, legend: dict | None = None
) -> np.ndarray:
    """``(K, 2)`` positions (row, column) of the pixels of ``png`` inside ``box`` (playwright's
    bounding box of the canvas), outside ``legend`` (the legend's box over it, whose swatches
    have the clouds' colours), within 40 levels of colour ``rgb`` (0-1)."""
    from PIL import Image

    image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    if legend is not None:
        x, y = int(legend["x"]), int(legend["y"])
        image[y : y + int(legend["height"]) + 1, x : x + int(legend["width"]) + 1] = 255
    x0, y0 = int(box["x"]), int(box["y"])
    image = image[y0 : y0 + int(box["height"]), x0 : x0 + int(box["width"])]
    want = np.round(np.asarray(rgb) * 255).astype(int)
    return np.argwhere(np.abs(image - want).max(-1) <= 40)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_report_draws_in_headless_chromium_offline(rng, tmp_path):
    """The page draws both clouds in their colours with no console error and no request but
    its own file, and "before" moves the source's points (to where the input pose puts them)."""
    playwright = pytest.importorskip("playwright.sync_api")
    _, ref, t = _pair(rng)
    # the source: another sampling of the reference's box, 6 m to one side as given
    src, _, _ = _pair(np.random.default_rng(7))
    src = src + np.array([6.0, 0.0, 0.0])
    t[:3, 3] -= t[:3, :3] @ [6.0, 0.0, 0.0]
    path = write_report(tmp_path / "r.html", src, ref, t, correspondences=(src[:20], ref[:20]))
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        requests: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        start = time.perf_counter()
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_function("() => document.body.dataset.drawn === '1'", timeout=60_000)
        took = time.perf_counter() - start
        canvases = page.evaluate(
            "() => [...document.querySelectorAll('canvas')].map(c => [c.width, c.height])"
        )
        box = page.locator("canvas").bounding_box()
        legend = page.inner_text("#pcreg-legend")
        after = page.screenshot(path=str(tmp_path / "after.png"))
        page.click("button[data-state=before]")
        before = page.screenshot(path=str(tmp_path / "before.png"))
        legend_before = page.inner_text("#pcreg-legend")
        browser.close()
    assert errors == []
    assert all(url.startswith("file:") for url in requests)  # offline: nothing else asked for
    assert len(canvases) == 1 and all(w > 100 and h > 100 for w, h in canvases)
    assert "source: source (moved)" in legend and "reference: reference" in legend
    assert "(as given)" in legend_before and "(moved)" not in legend_before
    pixels = {
        (name, colour): _colour_pixels(shot, rgb, box)
        for name, shot in (("after", after), ("before", before))
        for colour, rgb in (("src", SOURCE_COLOR), ("ref", REFERENCE_COLOR))
    }
    assert all(len(found) > 500 for found in pixels.values()), {
        k: len(v) for k, v in pixels.items()
    }
    # after: the source drawn over the reference; before: 6 m to one side of it
    ref_centre = pixels["after", "ref"].mean(0)
    moved_gap = np.linalg.norm(pixels["after", "src"].mean(0) - ref_centre)
    given_gap = np.linalg.norm(pixels["before", "src"].mean(0) - ref_centre)
    assert moved_gap < 40 < given_gap, (moved_gap, given_gap)
    assert took < 60


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_report_viewer_controls_and_awkward_pages_in_chromium(rng, tmp_path):
    """The legend's box hides its group, the slider enlarges the points, the aligned view is
    fitted to the aligned clouds even when the source is given 5 km away, a one-point pair
    is on screen, and file names made of markup do not break the page."""
    playwright = pytest.importorskip("playwright.sync_api")
    _, ref, t = _pair(rng)
    src, _, _ = _pair(np.random.default_rng(7))  # another sampling: both colours show aligned
    far_src = src + np.array([5000.0, 0.0, 0.0])  # as given, 5 km away
    far_t = t.copy()
    far_t[:3, 3] -= t[:3, :3] @ [5000.0, 0.0, 0.0]
    names = ("</script><!--<script>a.npy", "b.npy")
    one = ref[:1] + np.array([0.01, 0.0, 0.0])  # one point each, 1 cm apart
    pages = {
        "far": write_report(tmp_path / "far.html", far_src, ref, far_t),
        "one": write_report(tmp_path / "one.html", one, ref[:1], np.eye(4)),
        "same": write_report(tmp_path / "same.html", ref[:1], ref[:1], np.eye(4)),
        "markup": write_report(tmp_path / "markup.html", src, ref, t, names=names,
                               facts={"method": "geotransformer"}),
    }  # fmt: skip
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        errors: list[str] = []
        shots, texts = {}, {}
        for name, path in pages.items():
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(path.as_uri(), wait_until="load")
            page.wait_for_function("() => document.body.dataset.drawn === '1'", timeout=60_000)
            box = page.locator("canvas").bounding_box()
            legend = page.locator("#pcreg-legend").bounding_box()
            shots[name] = page.screenshot()
            texts[name] = page.inner_text("body")
            if name == "far":
                page.fill("#pcreg-size", "8")
                page.dispatch_event("#pcreg-size", "input")
                shots["big"] = page.screenshot()
                page.check("#pcreg-legend input[data-group=source]")  # already on: no change
                page.uncheck("#pcreg-legend input[data-group=source]")
                shots["hidden"] = page.screenshot()
                page.click("button[data-state=before]")  # 5 km apart: the camera re-fits
                shots["before"] = page.screenshot()
                far_box = box
            page.close()
        browser.close()
    assert errors == []
    src_px = {k: len(_colour_pixels(v, SOURCE_COLOR, far_box, legend)) for k, v in shots.items()}
    ref_px = {k: len(_colour_pixels(v, REFERENCE_COLOR, far_box, legend)) for k, v in shots.items()}
    # aligned, fitted to the aligned clouds: both fill the view (not a dot in a corner)
    spread = np.ptp(_colour_pixels(shots["far"], REFERENCE_COLOR, far_box, legend), axis=0)
    assert spread.min() > 200, spread
    assert src_px["big"] > 2 * src_px["far"] and ref_px["big"] > 2 * ref_px["far"]
    assert src_px["hidden"] == 0 and ref_px["hidden"] > 0.5 * ref_px["big"]
    assert src_px["before"] == 0  # the source stays hidden as given, too
    assert ref_px["before"] > 0  # both clouds in view, 5 km apart: the reference is a speck
    assert src_px["one"] > 0 and ref_px["one"] > 0  # one point each, 1 cm apart: in view
    assert src_px["same"] > 0  # the same one point twice (no extent at all): still drawn
    assert "geotransformer" in texts["markup"] and names[0] in texts["markup"]
    assert len(_colour_pixels(shots["markup"], SOURCE_COLOR, far_box, legend)) > 500


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_report_without_webgl_says_so_and_keeps_the_table(rng, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    src, ref, t = _pair(rng, 200)
    path = write_report(tmp_path / "r.html", src, ref, t, facts={"method": "geotransformer"})
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[*FLAGS, "--disable-3d-apis"])
        page = browser.new_page()
        crashes: list[str] = []
        page.on("pageerror", lambda e: crashes.append(str(e)))
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_function("() => document.body.dataset.drawn", timeout=60_000)
        state = page.evaluate("() => document.body.dataset.drawn")
        view = page.inner_text("#pcreg-view")
        table = page.inner_text("table")
        browser.close()
    assert crashes == [] and state == "no-webgl"
    assert "could not start WebGL" in view and "geotransformer" in table


def test_view_report_thins_to_report_points(rng, tmp_path):
    """``pcreg view --report``: every point of a 3DMatch-sized cloud by default (30,000 per
    cloud at most), ``--report-points`` sets it, and a bad count is refused before anything is
    written."""
    from pcreg.cli import main

    def drawn(page: Path) -> int:
        found = re.search(r"source ([0-9,]+) of ([0-9,]+)", page.read_text())
        return int(found.group(1).replace(",", ""))

    room = rng.uniform([0, 0, 0], [4, 3, 2.5], size=(18_000, 3))
    street = rng.uniform([0, 0, 0], [60, 20, 3], size=(120_000, 3))
    for name, cloud in (("room", room), ("street", street)):
        np.save(tmp_path / f"{name}.npy", cloud)
    pages = {}
    for name, extra in (("room", []), ("street", []), ("room", ["--report-points", "500"])):
        out = tmp_path / f"{name}{len(extra)}.html"
        src = str(tmp_path / f"{name}.npy")
        assert main(["view", src, src, "--report", str(out), *extra]) == 0
        pages[out.stem] = drawn(out)
    assert pages["room0"] == 18_000
    assert 22_000 <= pages["street0"] <= 36_000
    assert 350 <= pages["room2"] <= 650
    for bad in ("0", "many"):
        with pytest.raises(SystemExit) as exc:
            main(["view", src, src, "--report", str(tmp_path / "x.html"), "--report-points", bad])
        assert exc.value.code == 2 and not (tmp_path / "x.html").exists()
