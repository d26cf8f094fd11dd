"""A registration as one self-contained, interactive HTML file (``--report out.html``).

The page holds plotly's JavaScript inline, so it opens offline on any machine with a browser
(a remote server's result copied to a laptop): the two clouds turn, zoom and pan in 3-D, a
button switches between the input poses and the source moved by the estimate, the
correspondences are drawn coloured by whether the estimate (or the truth, with ``--gt``) maps
them within the inlier radius, and a table gives the transform, the errors against the truth,
the method and hypothesis that won, the verdict and the timings.

Size: the script is plotly.js's "gl3d" partial bundle (1.75 MB, vendored in
``pcreg/viz/vendor``: the 3-D traces and plotly's core, all the page uses) when its version is
the installed plotly's, else plotly's full bundle (4.8 MB); the clouds are thinned on a grid to
``max_points`` each (:func:`pcreg.viz.render.thin_for_display`) and written as float32, so a
3DMatch or KITTI pair stays under ~4 MB (with the full bundle, which a plotly release other
than the vendored bundle's gets, ~7 MB).
"""

from __future__ import annotations

import html
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pcreg._fs import atomic_output
from pcreg.viz.render import thin_for_display, transform_points
from pcreg.viz.style import (
    FAR_COLOR,
    INLIER_COLOR,
    REFERENCE_COLOR,
    SOURCE_COLOR,
    format_length,
    hex_color,
)

__all__ = ["plotly_script", "report_html", "result_facts", "write_report"]

logger = logging.getLogger(__name__)

#: plotly.js's gl3d partial bundle (npm ``plotly.js-gl3d-dist-min``, MIT; vendor/README.md)
GL3D_BUNDLE = Path(__file__).resolve().parent / "vendor" / "plotly-gl3d.min.js"

#: points drawn per cloud in a room's report: it draws in about 2 s even in headless Chromium
#: with software WebGL on 2 cores (BENCHMARKS.md, "HTML report"), still enough to judge an
#: alignment; a street's report keeps more (:data:`STREET_REPORT_POINTS`) to stay readable
REPORT_POINTS = 2_000
#: points drawn per cloud in the report of clouds spanning more than a room (a KITTI scan)
STREET_REPORT_POINTS = 20_000


def _cloud_trace(points: np.ndarray, name: str, color: tuple[float, float, float], size: float):
    """A cloud as square markers, which plotly's WebGL scatter sets up and draws much faster
    than its default circles (it meshes each marker from its symbol's glyph, and a square's
    is the simplest): the 3DMatch demo report drew in 3.97 s against 5.77 s in headless
    Chromium, same run (tools/report_load_time.py)."""
    import plotly.graph_objects as go

    p = np.asarray(points, np.float32)
    return go.Scatter3d(
        x=p[:, 0], y=p[:, 1], z=p[:, 2], mode="markers", name=name, hoverinfo="skip",
        marker={"size": size, "color": hex_color(color), "symbol": "square"},
    )  # fmt: skip


def _line_trace(starts: np.ndarray, ends: np.ndarray, name: str, color, width: float):
    import plotly.graph_objects as go

    if len(starts):
        gap = np.full((len(starts), 3), np.nan, np.float32)
        xyz = np.stack([starts, ends, gap], axis=1).astype(np.float32).reshape(-1, 3)
    else:
        xyz = np.zeros((0, 3), np.float32)
    return go.Scatter3d(
        x=xyz[:, 0], y=xyz[:, 1], z=xyz[:, 2], mode="lines", name=name,
        line={"color": hex_color(color), "width": width}, hoverinfo="skip", connectgaps=False,
    )  # fmt: skip


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
) -> str:
    """The report page as a string.

    Args:
        src, ref: ``(N, 3)`` / ``(M, 3)`` points, metres (any float dtype).
        transform: ``T_ref_src (4, 4)``; None: the clouds as given only (no toggle).
        names: the clouds' names in the legend (their files).
        correspondences: ``(src (K, 3), ref (K, 3))`` coordinates; at most ``max_lines`` drawn.
        radius: inlier radius in metres: a correspondence is "agreeing" when ``gt`` (else
            ``transform``) maps its source point within it of its reference point.
        gt: the true ``T_ref_src``, when known.
        facts: rows of the table (label -> value), e.g. the method, errors, timings.
    """
    import plotly.graph_objects as go
    import plotly.io as pio

    src = np.asarray(src, np.float64)
    ref = np.asarray(ref, np.float64)
    src_d, ref_d = thin_for_display(src, max_points), thin_for_display(ref, max_points)
    size = 1.5 if max(len(src_d), len(ref_d)) > 10_000 else 2.5
    src_label, ref_label = f"source: {names[0]}", f"reference: {names[1]}"
    traces = [_cloud_trace(ref_d, ref_label, REFERENCE_COLOR, size)]
    before = [True]
    after = [True]
    traces.append(_cloud_trace(src_d, src_label + " (as given)", SOURCE_COLOR, size))
    before.append(True)
    after.append(False)
    agree_text = ""
    if transform is not None:
        traces.append(
            _cloud_trace(
                transform_points(src_d, transform), src_label + " (moved)", SOURCE_COLOR, size
            )
        )
        before.append(False)
        after.append(True)
        if correspondences is not None:
            sc, rc = (np.asarray(c, np.float64).reshape(-1, 3) for c in correspondences)
            keep = (
                np.linspace(0, len(sc) - 1, min(max_lines, len(sc))).astype(int) if len(sc) else []
            )
            sc, rc = sc[keep], rc[keep]
            judge = gt if gt is not None else transform
            good = np.linalg.norm(transform_points(sc, judge) - rc, axis=1) < radius
            under = "the truth" if gt is not None else "the estimate"
            agree_text = (
                f"{int(good.sum())} of {len(good)} drawn correspondences within "
                f"{format_length(radius)} under {under}"
            )
            moved_c = transform_points(sc, transform)
            traces.append(
                _line_trace(moved_c[~good], rc[~good], "correspondence, farther", FAR_COLOR, 1.5)
            )
            traces.append(
                _line_trace(
                    moved_c[good],
                    rc[good],
                    f"correspondence within {format_length(radius)}",
                    INLIER_COLOR,
                    2.5,
                )
            )
            before += [False, False]
            after += [True, True]
    fig = go.Figure(traces)
    fig.update_traces(visible=True)
    for trace, shown in zip(fig.data, after if transform is not None else before, strict=True):
        trace.visible = shown
    menus = []
    if transform is not None:
        menus = [
            {
                "type": "buttons", "direction": "right", "x": 0.0, "y": 1.08, "xanchor": "left",
                "buttons": [
                    {"label": "after: source moved by T_ref_src", "method": "restyle",
                     "args": [{"visible": after}]},
                    {"label": "before: input poses", "method": "restyle",
                     "args": [{"visible": before}]},
                ],
            }
        ]  # fmt: skip
    fig.update_layout(
        title={"text": html.escape(title), "x": 0.5},
        scene={"aspectmode": "data", "xaxis_title": "x (m)", "yaxis_title": "y (m)",
               "zaxis_title": "z (m)"},
        legend={"x": 0.0, "y": 0.0, "bgcolor": "rgba(255,255,255,0.7)", "itemsizing": "constant"},
        updatemenus=menus, margin={"l": 0, "r": 0, "t": 70, "b": 0}, height=720,
        paper_bgcolor="white",
    )  # fmt: skip
    plot = pio.to_html(fig, full_html=False, include_plotlyjs=False, config={"displaylogo": False})
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
    script = f'<script type="text/javascript">{plotly_script()}</script>'
    return _PAGE.format(title=html.escape(title or "pcreg"), plot=script + plot, table=table)


def plotly_script() -> str:
    """The plotly.js source the page inlines: the vendored gl3d partial bundle when its version
    is the installed plotly's plotly.js version (the figure's JSON is written for that
    release), else plotly's full bundle (``plotly.offline.get_plotlyjs()``)."""
    import plotly.offline

    want = plotly.offline.get_plotlyjs_version()
    try:
        text = GL3D_BUNDLE.read_text(encoding="utf-8")
    except OSError:
        text = ""
    found = re.search(r"plotly\.js \(gl3d - minified\) v(\S+)", text[:400])
    if found and found.group(1) == want:
        return text
    logger.info("the vendored plotly.js gl3d bundle is not plotly.js %s: inlining the full "
                "bundle (the report is ~3 MB larger)", want)  # fmt: skip
    return plotly.offline.get_plotlyjs()


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
table {{ border-collapse: collapse; margin-top: 8px; }}
th {{ text-align: left; vertical-align: top; padding: 3px 12px 3px 0; font-weight: 600; }}
td pre {{ margin: 0; font-size: 13px; }}
.note {{ color: #666; font-size: 12px; }}
</style></head>
<body>
{plot}
<table>
{table}
</table>
<p class="note">Written by pcreg; opens offline (plotly is inlined). Drag to turn, scroll to
zoom; the buttons switch between the input poses and the source moved by the estimate.</p>
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
        )
    if result.units != "metres":
        rows["units"] = f"{result.units} (scale {result.scale:g})"
    rows["timings (s)"] = {k: round(float(v), 4) for k, v in dict(result.timings).items()}
    return rows
