"""A registration as one self-contained, interactive HTML file (``--report out.html``).

The page inlines its JavaScript, so it opens offline on any machine with a browser (a remote
server's result copied to a laptop): the two clouds turn, zoom and pan in 3-D, buttons switch
between the input poses and the source moved by the estimate, the correspondences are drawn
coloured by whether the estimate (or the truth, with ``--gt``) maps them within the inlier
radius, a legend names every layer (and hides it), a grid gives the scale, and a table gives
the transform, the errors against the truth, the method and hypothesis that won, the verdict
and the timings.

The drawing is three.js (vendored in ``pcreg/viz/vendor``, 0.56 MB, MIT) with a small viewer of
ours (``report_viewer.js``): points and line segments, drawn only when something changes. It
replaced plotly, whose 3-D scene alone took 1.79 s to draw two 20-point clouds in headless
Chromium with software WebGL on two cores; the three.js page draws a 3DMatch pair at all its
points in 0.42 s (BENCHMARKS.md, "HTML report"). Clouds are thinned on a grid to
``max_points`` each (:func:`pcreg.viz.render.thin_for_display`) and written as float32
relative to the reference's centre (so georeferenced coordinates keep their millimetres): a
3DMatch pair's page is 1.4 MB, a KITTI pair's 1.9 MB.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pcreg._fs import atomic_output
from pcreg.viz.render import thin_for_display, transform_points, view_for
from pcreg.viz.style import (
    FAR_COLOR,
    INLIER_COLOR,
    REFERENCE_COLOR,
    REPORT_POINTS,
    SOURCE_COLOR,
    format_length,
    hex_color,
    units_text,
)

__all__ = ["REPORT_POINTS", "report_html", "result_facts", "viewer_script", "write_report"]

_HERE = Path(__file__).resolve().parent
#: three.js r187, the parts the viewer uses, as one script (vendor/README.md: how it is built)
THREE_BUNDLE = _HERE / "vendor" / "three-pcreg.min.js"
#: the viewer: reads the page's data and draws it with the bundle's PCREG_THREE
VIEWER = _HERE / "report_viewer.js"


def _floats(points: np.ndarray) -> str:
    """``points (N, 3)`` as base64 of little-endian float32 (what the viewer's
    ``Float32Array`` reads)."""
    return base64.b64encode(np.ascontiguousarray(points, "<f4").tobytes()).decode("ascii")


def _layer(
    name: str, group: str, color, points: np.ndarray, states: list[str], kind: str = "points"
) -> dict:
    """A layer of the viewer: ``points (N, 3)`` (a line's start and end one after the other
    for ``kind="lines"``), drawn in ``states``; the legend's box of ``group`` hides it."""
    return {"name": name, "group": group, "color": hex_color(color), "kind": kind,
            "states": states, "xyz": _floats(points)}  # fmt: skip


def _segments(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``(2K, 3)``: each start followed by its end (three.js ``LineSegments``)."""
    return np.stack([starts, ends], axis=1).reshape(-1, 3)


def nice_cell(span: float, cells: int = 10) -> float:
    """A grid cell of 1, 2 or 5 x 10^k metres, the smallest such that ``span`` metres holds
    at most ``cells`` of them."""
    raw = max(span, 1e-9) / cells
    power = 10.0 ** math.floor(math.log10(raw))
    return next(power * m for m in (1.0, 2.0, 5.0, 10.0) if power * m >= raw * (1 - 1e-9))


def _grid(
    points: np.ndarray, axes: tuple[np.ndarray, np.ndarray, np.ndarray], unit: float = 1.0
) -> dict:
    """A square scale grid in the plane of ``points``' two major axes, under them along the
    minor one (the floor of a z-up scan), centred on them: about 10 cells across."""
    major, middle, minor = axes
    along = points @ np.stack([major, middle, minor]).T  # (N, 3) in the scene's axes
    low, high = along.min(0), along.max(0)
    cell = nice_cell(float(high[0] - low[0]))
    cells = 2 * math.ceil(max(high[0] - low[0], high[1] - low[1]) / (2 * cell)) + 2
    mid = (low + high) / 2
    centre = mid[0] * major + mid[1] * middle + low[2] * minor
    return {"u": major.tolist(), "v": middle.tolist(), "n": minor.tolist(),
            "centre": centre.tolist(), "size": cells * cell, "cells": cells,
            "label": format_length(cell * unit)}  # fmt: skip


def report_html(
    src: np.ndarray,
    ref: np.ndarray,
    transform: np.ndarray | None,
    *,
    names: tuple[str, str] = ("source", "reference"),
    correspondences: tuple[np.ndarray, np.ndarray] | None = None,
    radius: float = 0.1,
    gt: np.ndarray | None = None,
    facts: Mapping[str, Any] | None = None,
    title: str = "",
    max_points: int = REPORT_POINTS,
    max_lines: int = 400,
    unit: float = 1.0,
) -> str:
    """The report page as a string.

    Args:
        src, ref: ``(N, 3)`` / ``(M, 3)`` points, input units (any float dtype).
        transform: ``T_ref_src (4, 4)``; None: the clouds as given only (no toggle).
        names: the clouds' names in the legend (their files).
        correspondences: ``(src (K, 3), ref (K, 3))`` coordinates; at most ``max_lines`` drawn.
        radius: inlier radius in input units: a correspondence is "agreeing" when ``gt`` (else
            ``transform``) maps its source point within it of its reference point.
        gt: the true ``T_ref_src``, when known.
        facts: rows of the table (label -> value), e.g. the method, errors, timings.
        max_points: points drawn per cloud at most (thinned on a grid beyond).
        unit: metres per input unit (0.001 for millimetres): the lengths the page prints
            (inlier radius, grid cell) are converted with it; points, ``radius`` and the
            transforms stay in the input's units.
    """
    src = np.asarray(src, np.float64)
    ref = np.asarray(ref, np.float64)
    src_d, ref_d = thin_for_display(src, max_points), thin_for_display(ref, max_points)
    # drawn relative to the reference's centre: float32 keeps ~0.1 mm there even for
    # georeferenced coordinates of millions of metres
    origin = (ref_d.min(0) + ref_d.max(0)) / 2 if len(ref_d) else np.zeros(3)
    src_label, ref_label = f"source: {names[0]}", f"reference: {names[1]}"
    states = ["after", "before"] if transform is not None else ["given"]
    layers = [_layer(ref_label, "reference", REFERENCE_COLOR, ref_d - origin, states)]
    layers.append(
        _layer(f"{src_label} (as given)", "source", SOURCE_COLOR, src_d - origin,
               states[1:] or states)
    )  # fmt: skip
    shown = [ref_d, src_d]
    agree_text = ""
    if transform is not None:
        moved = transform_points(src_d, transform)
        layers.insert(
            1, _layer(f"{src_label} (moved)", "source", SOURCE_COLOR, moved - origin, ["after"])
        )
        shown[1] = moved
        if correspondences is not None:
            sc, rc = (np.asarray(c, np.float64).reshape(-1, 3) for c in correspondences)
            keep = np.linspace(0, len(sc) - 1, min(max_lines, len(sc))).astype(int)
            sc, rc = sc[keep], rc[keep]
            judge = gt if gt is not None else transform
            good = np.linalg.norm(transform_points(sc, judge) - rc, axis=1) < radius
            under = "the truth" if gt is not None else "the estimate"
            within = f"within {format_length(radius * unit)} under {under}"
            agree_text = f"{int(good.sum())} of {len(good)} drawn correspondences {within}"
            # drawn from where the estimate puts the source, judged by `judge`
            moved_c = transform_points(sc, transform) - origin
            rc = rc - origin
            for name, group, color, which in (
                (f"correspondence {within}", "near", INLIER_COLOR, good),
                ("correspondence, farther", "far", FAR_COLOR, ~good),
            ):
                if which.any():
                    lines = _segments(moved_c[which], rc[which])
                    label = f"{name} ({int(which.sum())})"
                    layers.append(_layer(label, group, color, lines, ["after"], "lines"))
    drawn = np.concatenate(shown) - origin
    size = 2 if max(len(src_d), len(ref_d)) > 10_000 else 3  # pixels
    data: dict[str, Any] = {"layers": layers, "states": states, "point_size": size}
    if len(drawn):
        view = view_for(drawn)
        data["view"] = {"front": view.front.tolist(), "up": view.up.tolist()}
        if float(np.ptp(drawn, axis=0).max()) > 1e-6:  # a scale for anything but one point
            data["grid"] = _grid(drawn, view.axes, unit)
    else:
        data["view"] = {"front": [0.0, 0.0, 1.0], "up": [0.0, 1.0, 0.0]}
    buttons = ""
    if transform is not None:
        buttons = (
            '<button type="button" data-state="after" class="active">after: source moved by '
            'T_ref_src</button>\n<button type="button" data-state="before">before: input poses'
            "</button>"
        )
    rows = dict(facts or {})
    if transform is not None:
        rows["T_ref_src"] = "\n".join(
            " ".join(f"{v: .6f}" for v in row) for row in np.asarray(transform, np.float64)
        )
    if agree_text:
        rows["correspondences"] = agree_text
    rows["points drawn"] = (
        f"source {len(src_d):,} of {len(src):,}, reference {len(ref_d):,} of {len(ref):,}"
    )
    table = "\n".join(
        f"<tr><th>{html.escape(str(k))}</th><td><pre>{html.escape(_text(v))}</pre></td></tr>"
        for k, v in rows.items()
    )
    return _PAGE.format(
        title=html.escape(title or "pcreg"),
        buttons=buttons,
        # no "<" at all inside the script element: "</script" would end it, "<!--<script"
        # would make the browser read past its end tag (a file named so would blank the page)
        data=json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e"),
        three=THREE_BUNDLE.read_text(encoding="utf-8"),
        viewer=viewer_script(),
        table=table,
    )


def viewer_script() -> str:
    """The viewer's JavaScript (``report_viewer.js``), as the page inlines it."""
    return VIEWER.read_text(encoding="utf-8")


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=1)
    return str(value)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 12px; color: #222; }}
h1 {{ font-size: 18px; margin: 0 0 8px 0; }}
#pcreg-tools {{ display: flex; gap: 8px; align-items: center; flex-wrap: wrap;
  margin-bottom: 6px; }}
#pcreg-tools button {{ padding: 4px 10px; border: 1px solid #888; background: #f4f4f4;
  border-radius: 3px; cursor: pointer; }}
#pcreg-tools button.active {{ background: #2a6fdb; color: white; border-color: #2a6fdb; }}
#pcreg-main {{ position: relative; }}
#pcreg-view {{ width: 100%; height: 70vh; min-height: 420px; border: 1px solid #ddd; }}
#pcreg-view.nogl {{ display: flex; align-items: center; justify-content: center; color: #a00; }}
#pcreg-legend {{ position: absolute; left: 8px; bottom: 8px; background: rgba(255,255,255,0.85);
  padding: 6px 8px; border: 1px solid #ddd; font-size: 13px; }}
#pcreg-legend label {{ display: block; cursor: pointer; }}
.swatch {{ display: inline-block; width: 10px; height: 10px; margin: 0 6px 0 2px; }}
.swatch.line {{ height: 3px; width: 16px; vertical-align: middle; }}
.gridnote {{ color: #666; margin-top: 2px; }}
table {{ border-collapse: collapse; margin-top: 8px; }}
th {{ text-align: left; vertical-align: top; padding: 3px 12px 3px 0; font-weight: 600; }}
td pre {{ margin: 0; font-size: 13px; }}
.note {{ color: #666; font-size: 12px; }}
</style></head>
<body>
<h1>{title}</h1>
<div id="pcreg-tools">{buttons}
<label>point size <input id="pcreg-size" type="range" min="1" max="8" step="0.5"></label>
<button id="pcreg-reset" type="button">reset view</button>
</div>
<div id="pcreg-main"><div id="pcreg-view"></div><div id="pcreg-legend"></div></div>
<script type="application/json" id="pcreg-data">{data}</script>
<script>{three}</script>
<script>{viewer}</script>
<table>
{table}
</table>
<p class="note">Written by pcreg; opens offline (three.js is inlined). Drag to turn, right-drag
or shift-drag to pan, scroll to zoom; the legend's boxes hide a layer.</p>
</body></html>
"""


def write_report(
    path: str | os.PathLike[str],
    src: np.ndarray,
    ref: np.ndarray,
    transform: np.ndarray | None,
    *,
    overwrite: bool = False,
    **kwargs: Any,
) -> Path:
    """:func:`report_html` written atomically to ``path`` (UTF-8)."""
    page = report_html(src, ref, transform, **kwargs)
    path = Path(path)
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return path


def result_facts(result: Any, record: Mapping[str, Any]) -> dict[str, Any]:
    """The table rows of a :class:`~pcreg.registration.RegistrationResult` and its
    ``--json`` record: verdict, method and hypothesis, errors (when a truth was given) and
    timings, with lengths in readable units."""
    rows: dict[str, Any] = {
        "registered": "yes" if result.registered else f"NO: {result.reason}",
        "confidence": float(result.confidence),
        "method": result.method_used or result.method,
        "model": result.model,
        "hypothesis that won": result.hypothesis or "-",
        "ICP": "yes" if result.icp else "no",
    }
    if record.get("rre_deg") is not None:
        rows["error vs truth"] = (
            f"RRE {record['rre_deg']:.3f} deg, RTE {format_length(record['rte_m'])}, "
            f"RMSE {format_length(record['rmse_m'])}"
        )  # the record's _m keys are metres whatever the input's unit
    if result.units != "metres" or result.object:
        rows["units"] = units_text(result.units, result.object, result.scale)
    rows["timings (s)"] = {k: round(float(v), 4) for k, v in dict(result.timings).items()}
    return rows
