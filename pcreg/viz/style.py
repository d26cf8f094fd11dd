"""How pictures look, shared by the PNG panels and the HTML report: the colours of the source,
the reference and the correspondences, the legends naming them, and lengths in units a person
reads (mm / cm / m / km by magnitude)."""

from __future__ import annotations

from pcreg._text import format_length

__all__ = [
    "FAR_COLOR",
    "INLIER_COLOR",
    "OUTLIER_COLOR",
    "REFERENCE_COLOR",
    "REPORT_POINTS",
    "SOURCE_COLOR",
    "format_length",
    "hex_color",
    "units_text",
]

SOURCE_COLOR = (0.95, 0.55, 0.05)  # orange
REFERENCE_COLOR = (0.10, 0.45, 0.85)  # blue
INLIER_COLOR = (0.10, 0.70, 0.20)  # green: a correspondence within the inlier radius
OUTLIER_COLOR = (0.85, 0.10, 0.10)  # red
# outliers are drawn pale: a network's correspondences are mostly outliers at low overlap
# (30 % within 60 cm on a KITTI pair registered to 3.6 cm), and solid red lines hid the inliers
FAR_COLOR = (0.97, 0.72, 0.72)

#: points drawn per cloud in the HTML report by default (:mod:`pcreg.viz.report`): all of a
#: 3DMatch fragment (16-19k), a KITTI scan thinned from ~122k; such a report draws in about
#: 0.5 s in headless Chromium with software WebGL on 2 cores (BENCHMARKS.md, "HTML report")
REPORT_POINTS = 30_000


def units_text(units: str, scaled_object: bool, scale: float) -> str:
    """How a pair's reading of its units reads: ``"millimetres"``, or ``"millimetres (an
    object, scaled x0.01734 for the network)"``, or ``"centimetres (x0.01 for the network)"``
    when the factor is not the identity."""
    if scaled_object:
        return f"{units} (an object, scaled x{scale:.4g} for the network)"
    return units if scale == 1.0 else f"{units} (x{scale:.4g} for the network)"


def hex_color(rgb: tuple[float, float, float]) -> str:
    """``(r, g, b)`` in [0, 1] as ``"#rrggbb"`` (for the HTML report)."""
    return "#" + "".join(f"{round(255 * min(max(c, 0.0), 1.0)):02x}" for c in rgb)
