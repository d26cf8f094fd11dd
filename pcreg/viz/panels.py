"""Registration pictures as PNG: before / after renders and the correspondences, side by side
with captions, a title and a legend that names the source, the reference and what the line
colours mean."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pcreg.viz.figures import save_figure
from pcreg.viz.render import (
    MAX_DRAWN_POINTS,
    principal_view,
    render_clouds,
    thin_for_display,
    transform_points,
    view_for,
)
from pcreg.viz.style import (
    FAR_COLOR,
    INLIER_COLOR,
    REFERENCE_COLOR,
    SOURCE_COLOR,
    format_length,
)

__all__ = [
    "Legend",
    "alignment_panels",
    "correspondence_panel",
    "pair_legend",
    "panels_figure",
    "save_alignment_png",
    "save_panels_png",
]

#: ``[(label, rgb), ...]``: one legend entry per colour
Legend = list[tuple[str, tuple[float, float, float]]]

#: a source this many times smaller than the reference (bounding-box diagonals: an object in
#: a scene) gets a close-up panel: in the whole scene it is a dot
CLOSE_UP_RATIO = 5.0
#: the close-up shows the reference within this many source diagonals of the moved source
CLOSE_UP_REACH = 1.0
#: and draws the source this share of its diagonal nearer the camera than it lies
CLOSE_UP_LIFT = 0.01


def pair_legend(src_name: str = "source", ref_name: str = "reference") -> Legend:
    """The legend of the two clouds: ``source: NAME`` orange, ``reference: NAME`` blue."""
    return [
        (f"source: {src_name}" if src_name != "source" else "source", SOURCE_COLOR),
        (f"reference: {ref_name}" if ref_name != "reference" else "reference", REFERENCE_COLOR),
    ]


def correspondence_legend(radius: float, truth: bool, unit: float = 1.0) -> Legend:
    """The legend of :func:`correspondence_panel`'s lines at inlier ``radius`` (input units;
    ``unit``: metres per input unit, so the text reads ``5.8 mm`` for a scan in millimetres)."""
    under = "the truth" if truth else "the estimate"
    return [
        (f"correspondence within {format_length(radius * unit)} under {under}", INLIER_COLOR),
        ("farther", FAR_COLOR),
    ]


def alignment_panels(
    src_points: np.ndarray, ref_points: np.ndarray, transform: np.ndarray | None
) -> list[tuple[str, np.ndarray]]:
    """Before (as given) and after (source moved by ``transform``) renders, source orange and
    reference blue, from one camera; with ``transform=None`` only the "as given" panel."""
    # thinned once here, not once per panel (each render would thin them again)
    src = thin_for_display(np.asarray(src_points, np.float64), MAX_DRAWN_POINTS // 2)
    ref = thin_for_display(np.asarray(ref_points, np.float64), MAX_DRAWN_POINTS // 2)
    if transform is None:
        return [
            ("as given", render_clouds([(src, SOURCE_COLOR), (ref, REFERENCE_COLOR)], crop=True))
        ]
    moved = transform_points(src, transform)
    view = view_for(np.vstack([moved, ref]))  # the after panel's camera, used for both
    panels = [
        (
            "before (input poses)",
            render_clouds([(src, SOURCE_COLOR), (ref, REFERENCE_COLOR)], view=view, crop=True),
        ),
        (
            "after (source moved by T_ref_src)",
            render_clouds([(moved, SOURCE_COLOR), (ref, REFERENCE_COLOR)], view=view, crop=True),
        ),
    ]
    close = _close_up(transform_points(np.asarray(src_points, np.float64), transform),
                      np.asarray(ref_points, np.float64))  # fmt: skip
    return panels if close is None else [*panels, close]


def _close_up(moved: np.ndarray, ref: np.ndarray) -> tuple[str, np.ndarray] | None:
    """``(caption, image)``: the moved source ``(N, 3)`` and the reference ``(M, 3)`` points
    within :data:`CLOSE_UP_REACH` source diagonals of its centre, from their own camera; None
    unless the source is :data:`CLOSE_UP_RATIO` times smaller than the reference."""
    small = float(np.linalg.norm(np.ptp(moved, axis=0)))
    large = float(np.linalg.norm(np.ptp(ref, axis=0)))
    if small <= 0 or large < CLOSE_UP_RATIO * small:
        return None
    near = ref[np.linalg.norm(ref - moved.mean(axis=0), axis=1) < CLOSE_UP_REACH * small]
    src = thin_for_display(moved, MAX_DRAWN_POINTS // 2)
    near = thin_for_display(near, MAX_DRAWN_POINTS // 2)
    view = view_for(np.vstack([src, near]))
    # the source in front of the reference: where it lies on the scene's own points (a crop of
    # the scene lies exactly on them), the reference drawn over it had hidden it; nudged 1 %
    # of its diagonal toward the camera, it shows, and the scene around it shows too
    lifted = src + CLOSE_UP_LIFT * small * np.asarray(view.front, np.float64)
    image = render_clouds([(near, REFERENCE_COLOR), (lifted, SOURCE_COLOR)], view=view,
                          crop=True)  # fmt: skip
    return "close-up of the source", image


def correspondence_panel(
    src_points: np.ndarray,
    ref_points: np.ndarray,
    transform: np.ndarray,
    correspondences: tuple[np.ndarray, np.ndarray],
    *,
    gt: np.ndarray | None = None,
    radius: float = 0.1,
    max_lines: int = 250,
    unit: float = 1.0,
) -> tuple[str, np.ndarray]:
    """``(caption, image)``: the reference, and the source moved by ``transform`` and set beside
    it, with the correspondences (source / reference coordinates ``(K, 3)`` each) as segments
    (at most ``max_lines``, evenly subsampled). A segment is green when ``gt`` (else the
    estimate ``transform``) maps its source point within ``radius`` (input units) of its
    reference point, pale red otherwise (drawn under the green ones); the caption states the
    same threshold, converted to a readable length with ``unit`` (metres per input unit).
    The source is set beside the reference along whichever of the scene's two long axes
    leaves the picture closer to square (a street: across the road, seen from above)."""
    src = np.asarray(src_points, np.float64)
    ref = np.asarray(ref_points, np.float64)
    major, middle, _ = principal_view(ref)
    spans = {0: float(np.ptp(ref @ major)), 1: float(np.ptp(ref @ middle))}

    def squareness(axis: int) -> float:
        w, h = spans[0], spans[1]
        w, h = (w * 2.15, h) if axis == 0 else (w, h * 2.15)
        return max(w, h) / max(min(w, h), 1e-12)

    axis = min((0, 1), key=squareness)
    # the moved source's near edge 15 % of the reference's span beyond its far edge: a source
    # as large as the reference ends up 1.15 spans over, and a small crop found at the
    # reference's edge just beside it (at 1.15 spans from where it lies it left the frame)
    direction = major if axis == 0 else middle
    along = transform_points(src, transform) @ direction
    beyond = float((ref @ direction).max()) + 0.15 * spans[axis]
    offset = (beyond - float(along.min())) * direction
    src_c, ref_c = (np.asarray(c, np.float64).reshape(-1, 3) for c in correspondences)
    total = len(src_c)
    keep = np.linspace(0, total - 1, min(max_lines, total)).astype(int) if total else []
    src_c, ref_c = src_c[keep], ref_c[keep]
    judge = np.asarray(gt if gt is not None else transform, np.float64)
    good = np.linalg.norm(transform_points(src_c, judge) - ref_c, axis=1) < radius
    order = np.argsort(good, kind="stable")  # the pale outliers first, the inliers on top
    src_c, ref_c, good = src_c[order], ref_c[order], good[order]
    colors = np.where(good[:, None], INLIER_COLOR, FAR_COLOR)
    under = "the truth" if gt is not None else "the estimate"
    share = f"{good.mean():.0%}" if len(good) else "none"
    caption = (
        f"{len(keep)} of {total} correspondences: {share} within {format_length(radius * unit)} "
        f"under {under} (green)"
    )
    shown = transform_points(src, transform) + offset
    view = view_for(np.vstack([shown, ref]))
    starts, ends = transform_points(src_c, transform) + offset, ref_c
    if view.overhead:  # seen from above, the lines pass under the clouds: the scans stay
        # readable and the lines show between their points (a street's lines cover its road)
        depth = float(np.ptp(np.vstack([shown, ref]) @ view.front)) + 1.0
        starts, ends = starts - depth * view.front, ends - depth * view.front
    image = render_clouds(
        [(shown, SOURCE_COLOR), (ref, REFERENCE_COLOR)],
        lines=(starts, ends),
        line_color=colors,
        view=view,
        crop=True,
    )
    return caption, image


def panels_figure(
    panels: Sequence[tuple[str, np.ndarray]], *, title: str = "", legend: Legend | None = None
):
    """The matplotlib figure of images side by side with captions, ``title`` above and
    ``legend`` entries (coloured squares) below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    # every image at the same height, each as wide as its aspect asks
    ratios = [img.shape[1] / img.shape[0] for _, img in panels]
    row = 4.5  # inches
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(max(row * sum(ratios), 7.0), row + 1.3),
        squeeze=False,
        gridspec_kw={"width_ratios": ratios},
    )
    for ax, (name, image), ratio in zip(axes[0], panels, ratios, strict=True):
        ax.imshow(image)
        # wrapped to the panel's width (10-point text: about 0.6 x 10 points a character), so
        # that a caption does not run into the next panel's or off the figure
        chars = max(20, int(row * ratio * 72 / (0.6 * 10)))
        ax.set_title(textwrap.fill(name, chars), fontsize=10)
        ax.axis("off")
    if title:
        fig.suptitle(title)
    bottom = 0.0
    if legend:
        handles = [Patch(facecolor=c, edgecolor="0.3", label=label) for label, c in legend]
        # a narrow figure (one panel) puts the entries on two rows so that none is cut off
        ncol = min(len(handles), 4 if fig.get_figwidth() >= 11 else 2)
        fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=9)
        bottom = 0.05 * -(-len(handles) // ncol) + 0.02
    top = 1.0 - (0.06 * (title.count("\n") + 1) if title else 0.0)
    fig.tight_layout(rect=(0, bottom, 1, top))
    return fig


def save_panels_png(
    path: str | os.PathLike[str],
    panels: Sequence[tuple[str, np.ndarray]],
    *,
    title: str = "",
    legend: Legend | None = None,
    overwrite: bool = False,
) -> Path:
    """:func:`panels_figure`, written atomically as PNG."""

    fig = panels_figure(panels, title=title, legend=legend)
    path = Path(path)
    return save_figure(fig, path, dpi=90, overwrite=overwrite)


def save_alignment_png(
    path: str | os.PathLike[str],
    src_points: np.ndarray,
    ref_points: np.ndarray,
    transform: np.ndarray | None,
    *,
    title: str = "",
    names: tuple[str, str] = ("source", "reference"),
    correspondences: tuple[np.ndarray, np.ndarray] | None = None,
    gt: np.ndarray | None = None,
    radius: float = 0.1,
    overwrite: bool = False,
    max_lines: int = 250,
    unit: float = 1.0,
) -> Path:
    """Write a before/after PNG: source (orange) and reference (blue) as given, then with the
    source moved by ``transform`` (``T_ref_src``; None: the "as given" panel alone). With
    ``correspondences`` (source and reference coordinates) a third panel draws them
    (:func:`correspondence_panel`). The legend names the clouds (``names``: their files).
    Points, ``radius`` and the transforms are in the input's units; ``unit`` is metres per
    input unit (0.001 for millimetres), for the lengths the captions print."""
    panels = alignment_panels(src_points, ref_points, transform)
    legend = pair_legend(*names)
    if correspondences is not None and transform is not None:
        panels.append(
            correspondence_panel(
                src_points,
                ref_points,
                transform,
                correspondences,
                gt=gt,
                radius=radius,
                max_lines=max_lines,
                unit=unit,
            )
        )
        legend += correspondence_legend(radius, gt is not None, unit)
    return save_panels_png(path, panels, title=title, legend=legend, overwrite=overwrite)
