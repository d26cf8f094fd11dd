"""Pictures of a map made of many scans: a PNG of two orthographic views with the pose graph
drawn over them, and the offline HTML report (:mod:`pcreg.viz.report`'s page and viewer) with
one layer per scan and the graph's edges as lines. Viz takes arrays: the scans already moved
into the world frame, their colours and the edges as index pairs."""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pcreg._fs import atomic_output
from pcreg.viz.render import principal_view, thin_for_display
from pcreg.viz.report import _PAGE, THREE_BUNDLE, _grid, _layer, _segments, _text, viewer_script

__all__ = ["KEPT_COLOR", "REJECTED_COLOR", "map_figure", "save_map_png", "scan_colors",
           "write_map_report"]  # fmt: skip

KEPT_COLOR = (0.05, 0.05, 0.05)  # a graph edge the optimisation kept: black
REJECTED_COLOR = (0.90, 0.05, 0.05)  # a registered edge the graph rejected: red, dashed


def scan_colors(count: int) -> np.ndarray:
    """``(count, 3)`` RGB in [0, 1], one per scan: matplotlib's tab20 (then repeats)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    order = [*range(0, 20, 2), *range(1, 20, 2)]  # the strong shades first
    return np.array([cmap(order[k % 20])[:3] for k in range(count)])


def _edge_lines(
    centres: np.ndarray, edges: Sequence[tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends ``(E, 3)`` of the edges between the scans' centres (finite ones)."""
    pairs = [(a, b) for a, b in edges if np.isfinite(centres[[a, b]]).all()]
    if not pairs:
        return np.zeros((0, 3)), np.zeros((0, 3))
    a, b = np.array(pairs).T
    return centres[a], centres[b]


#: the share of drawn points a view may leave outside its frame, at each end of each axis: a
#: few stray points (a range scan's mixed pixels) would otherwise stretch the view
STRAY_SHARE = 0.002


def _frame(ax: Any, x: np.ndarray, y: np.ndarray, dots: Sequence[np.ndarray]) -> None:
    """A view's limits: every scan's centre (``dots``, each ``(2,)``) and the drawn points
    ``x``, ``y`` but the :data:`STRAY_SHARE` farthest at each end of each axis, with a 5 %
    margin."""
    lo = np.array([np.quantile(x, STRAY_SHARE), np.quantile(y, STRAY_SHARE)])
    hi = np.array([np.quantile(x, 1 - STRAY_SHARE), np.quantile(y, 1 - STRAY_SHARE)])
    if len(dots):
        lo, hi = np.minimum(lo, np.min(dots, axis=0)), np.maximum(hi, np.max(dots, axis=0))
    pad = 0.05 * np.maximum(hi - lo, 1e-12)
    ax.set_xlim(lo[0] - pad[0], hi[0] + pad[0])
    ax.set_ylim(lo[1] - pad[1], hi[1] + pad[1])


def map_figure(
    scans: Sequence[np.ndarray | None],
    kept: Sequence[tuple[int, int]],
    rejected: Sequence[tuple[int, int]] = (),
    *,
    labels: Sequence[str] | None = None,
    title: str = "",
    unit: float = 1.0,
    max_points: int = 60_000,
):
    """Two orthographic views of the map (along its minor axis, then along its middle one):
    every placed scan in its colour (:func:`scan_colors`), a numbered dot at its centre, the
    kept edges as black lines and the rejected ones as thicker dashed red lines over them;
    each view framed by :func:`_frame` (a few stray points fall outside it).

    Args:
        scans: ``K`` clouds ``(N_k, 3)`` in the world frame (input units); None: unplaced.
        kept, rejected: edges as ``(scan, scan)`` index pairs.
        labels: the scans' names for the legend (default ``scan k``).
        unit: metres per input unit (axis labels read mm / cm / m).
        max_points: points drawn in all, thinned on a grid.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    count = len(scans)
    colors = scan_colors(count)
    placed = [k for k in range(count) if scans[k] is not None and len(scans[k])]
    labels = list(labels) if labels is not None else [f"scan {k}" for k in range(count)]
    every = np.concatenate([np.asarray(scans[k], np.float64) for k in placed])
    major, middle, minor = principal_view(every)
    centre = every.mean(axis=0)
    share = max_points / max(len(every), 1)
    centres = np.full((count, 3), np.nan)
    for k in placed:
        centres[k] = np.asarray(scans[k], np.float64).mean(axis=0)
    drawn = [
        thin_for_display(np.asarray(scans[k], np.float64), max(200, int(share * len(scans[k]))))
        for k in placed
    ]
    points = np.concatenate(drawn) - centre
    owner = np.concatenate([np.full(len(d), k) for d, k in zip(drawn, placed, strict=True)])
    mix = np.random.default_rng(0).permutation(len(points))  # no scan hides the others
    points, owner = points[mix] * unit, owner[mix]
    spread = np.ptp(points @ np.stack([major, middle, minor]).T, axis=0)
    panel = 15 * 0.84 / 2  # inches across each view
    height = 1.6 + panel * float(max(spread[1], spread[2]) / max(spread[0], 1e-12))
    fig, axes = plt.subplots(1, 2, figsize=(15, min(max(height, 4.5), 9.0)))
    for ax, (u, v, name) in zip(
        axes,
        ((major, middle, "along the minor axis"), (major, minor, "along the middle axis")),
        strict=True,
    ):
        ax.scatter(points @ u, points @ v, s=0.4, c=colors[owner], rasterized=True)
        for k in placed:  # legend entries only
            ax.scatter([], [], s=20, color=colors[k], label=f"{k}: {os.path.basename(labels[k])}")
        # the rejected edges over the kept ones (a pair may have both), under the scans' dots
        for group, color, style, lw, z in ((kept, KEPT_COLOR, "-", 1.4, 3),
                                            (rejected, REJECTED_COLOR, "--", 2.6, 4)):  # fmt: skip
            starts, ends = _edge_lines(centres, group)
            for s, e in zip(starts, ends, strict=True):
                s, e = (s - centre) * unit, (e - centre) * unit
                ax.plot([s @ u, e @ u], [s @ v, e @ v], style, color=color, lw=lw, alpha=0.9,
                        zorder=z)  # fmt: skip
        for k in placed:
            c = (centres[k] - centre) * unit
            ax.plot(c @ u, c @ v, "o", ms=13, color=colors[k], mec="black", zorder=5)
            ax.annotate(str(k), (c @ u, c @ v), ha="center", va="center", fontsize=8, zorder=6)
        _frame(ax, points @ u, points @ v, [((centres[k] - centre) * unit) @ np.stack([u, v]).T
                                            for k in placed])  # fmt: skip
        ax.set_aspect("equal")
        ax.set_title(f"view {name}")
        ax.set_xlabel("major axis (m)")
        ax.set_ylabel(("middle" if v is middle else "minor") + " axis (m)")
    handles, names = axes[0].get_legend_handles_labels()
    from matplotlib.lines import Line2D

    handles += [Line2D([], [], color=KEPT_COLOR, lw=1.4), Line2D([], [], color=REJECTED_COLOR,
                                                               lw=2.6, ls="--")]  # fmt: skip
    names += [f"edge kept by the graph ({len(kept)})", f"edge rejected ({len(rejected)})"]
    fig.legend(handles, names, loc="center right", fontsize=8)
    fig.suptitle(title or f"map of {len(placed)} scans")
    fig.tight_layout(rect=(0, 0, 0.84, 1))
    return fig


def save_map_png(path: str | os.PathLike[str], *args: Any, overwrite: bool = False,
                 **kwargs: Any) -> Path:  # fmt: skip
    """:func:`map_figure` written atomically as a PNG."""
    from pcreg.viz.figures import save_figure

    fig = map_figure(*args, **kwargs)
    return save_figure(fig, path, dpi=100, overwrite=overwrite)


def write_map_report(
    path: str | os.PathLike[str],
    scans: Sequence[np.ndarray | None],
    kept: Sequence[tuple[int, int]],
    rejected: Sequence[tuple[int, int]] = (),
    *,
    labels: Sequence[str] | None = None,
    facts: Mapping[str, Any] | None = None,
    title: str = "",
    unit: float = 1.0,
    max_points: int = 20_000,
    overwrite: bool = False,
) -> Path:
    """The map as one offline HTML page (the viewer of :mod:`pcreg.viz.report`): a layer per
    placed scan (``max_points`` each at most), the kept and rejected edges between the scans'
    centres, a scale grid and a table of ``facts``. Arguments as :func:`map_figure`."""
    count = len(scans)
    colors = scan_colors(count)
    labels = list(labels) if labels is not None else [f"scan {k}" for k in range(count)]
    placed = [k for k in range(count) if scans[k] is not None and len(scans[k])]
    drawn = {k: thin_for_display(np.asarray(scans[k], np.float64), max_points) for k in placed}
    every = np.concatenate(list(drawn.values()))
    origin = (every.min(0) + every.max(0)) / 2
    states = ["map"]
    layers = [
        _layer(f"{k}: {labels[k]}", f"scan{k}", tuple(colors[k]), drawn[k] - origin, states)
        for k in placed
    ]
    centres = np.full((count, 3), np.nan)
    for k in placed:
        centres[k] = np.asarray(scans[k], np.float64).mean(axis=0)
    for name, group, color, which in (
        ("edge kept by the graph", "kept", KEPT_COLOR, kept),
        ("edge rejected by the graph", "rejected", REJECTED_COLOR, rejected),
    ):
        starts, ends = _edge_lines(centres, which)
        if len(starts):
            lines = _segments(starts - origin, ends - origin)
            layers.append(_layer(f"{name} ({len(starts)})", group, color, lines, states, "lines"))
    data: dict[str, Any] = {"layers": layers, "states": states, "point_size": 2}
    major, middle, minor = principal_view(every)
    data["view"] = {"front": minor.tolist(), "up": middle.tolist()}
    data["grid"] = _grid(every - origin, (major, middle, minor), unit)
    rows = dict(facts or {})
    rows["points drawn"] = f"{sum(len(d) for d in drawn.values()):,} of {len(placed)} scans"
    rows["grid cell"] = data["grid"]["label"]
    table = "\n".join(
        f"<tr><th>{html.escape(str(k))}</th><td><pre>{html.escape(_text(v))}</pre></td></tr>"
        for k, v in rows.items()
    )
    page = _PAGE.format(
        title=html.escape(title or f"pcreg map: {len(placed)} scans"),
        buttons="",
        data=json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e"),
        three=THREE_BUNDLE.read_text(encoding="utf-8"),
        viewer=viewer_script(),
        table=table,
    )
    path = Path(path)
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return path
