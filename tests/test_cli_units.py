"""Outputs in the user's units: the Stanford bunny in millimetres (a ``.csv`` with a header),
registered with no flags, reports ``units: millimetres`` and sub-millimetre errors in the text,
the picture's captions, the HTML report and ``--json`` (whose ``_m`` keys hold metres)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import pcreg.viz.panels as panels
from pcreg.cli import main

pytestmark = pytest.mark.open3d

TRAIN = Path(__file__).resolve().parents[1].parent / "shared" / "train_data"
BUNNY = TRAIN / "stanford_bunny_range_scans"


@pytest.fixture(scope="module")
def bunny_mm(tmp_path_factory):
    if not (BUNNY / "pairs.json").is_file():
        pytest.skip(f"{BUNNY} not found")
    pair = json.loads((BUNNY / "pairs.json").read_text())["pairs"][0]
    src = np.load(BUNNY / pair["src"]).astype(np.float64) * 1000
    ref = np.load(BUNNY / pair["ref"]).astype(np.float64) * 1000
    gt = np.asarray(pair["T_ref_src"], np.float64)
    gt[:3, 3] *= 1000
    motion = np.eye(4)
    motion[:3, :3] = Rotation.random(random_state=1).as_matrix()
    motion[:3, 3] = [30.0, -10.0, 20.0]  # millimetres
    moved = src @ motion[:3, :3].T + motion[:3, 3]
    d = tmp_path_factory.mktemp("bunny_mm")
    for name, pts in (("src.csv", moved), ("ref.csv", ref)):
        np.savetxt(d / name, pts, delimiter=",", header="x,y,z", comments="", fmt="%.4f")
    np.savetxt(d / "gt.txt", gt @ np.linalg.inv(motion))
    return d


def _lengths(text: str) -> list[tuple[float, str]]:
    return [(float(v), u) for v, u in re.findall(r"(\d+(?:\.\d+)?) (mm|cm|m|km)\b", text)]


def test_json_names_millimetres_and_holds_metres(bunny_mm, capsys, tmp_path):
    d = bunny_mm
    html = tmp_path / "r.html"
    argv = ["register", str(d / "src.csv"), str(d / "ref.csv"), "--gt", str(d / "gt.txt"),
            "--json", "--report", str(html)]  # fmt: skip
    assert main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["units"], record["object"]) == ("millimetres", True)
    assert record["rre_deg"] < 1.0
    assert 0 < record["rte_m"] < 0.001 and 0 < record["rmse_m"] < 0.001  # metres: under 1 mm
    # the 5 cm voxel at the network's scale, as metres of the input: 2.8 mm
    assert record["voxel_size_m"] == pytest.approx(0.05 / record["scale"] * 0.001, rel=1e-6)
    assert all(r["units"] == "millimetres" for r in record["readings"] if r.get("object"))
    page = html.read_text()
    assert "millimetres (an object, scaled x" in page
    rte = re.search(r"RTE (\d+(?:\.\d+)?) (mm|cm|m)\b", page)
    assert rte and rte.group(2) == "mm" and float(rte.group(1)) < 1.0, rte
    within = re.search(r"within (\d+(?:\.\d+)?) (mm|cm|m)\b", page)
    assert within and within.group(2) == "mm", within  # 10 cm at the network's scale


def test_text_and_picture_print_millimetres(bunny_mm, capsys, tmp_path, monkeypatch):
    d = bunny_mm
    shown: list[str] = []
    real = panels.save_panels_png

    def spy(path, panel_list, *, title="", legend=(), **kw):
        shown.extend([title, *(c for c, _ in panel_list), *(t for t, _ in legend)])
        return real(path, panel_list, title=title, legend=legend, **kw)

    monkeypatch.setattr(panels, "save_panels_png", spy)
    argv = ["register", str(d / "src.csv"), str(d / "ref.csv"), "--gt", str(d / "gt.txt"),
            "--render", str(tmp_path / "a.png")]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "units read as millimetres (an object" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("vs ground truth"))
    line, judged = line.split("; ", 1)  # the errors, then whether they keep the promise
    assert judged.startswith("right: RRE "), judged
    errors = _lengths(line)
    assert [u for _, u in errors] == ["mm", "mm"] and all(v < 1.0 for v, _ in errors), line
    assert (tmp_path / "a.png").stat().st_size > 10_000
    caption = " | ".join(shown)
    assert "units: millimetres" in caption
    assert re.search(r"RTE 0\.\d+ mm", caption), caption
    radii = [u for v, u in _lengths(caption) if u != "deg"]
    assert radii and set(radii) == {"mm"}, caption  # no "5.77 m" for a 5.77 mm radius
