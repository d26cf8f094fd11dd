"""Pictures: headless Open3D renders of point clouds composed into PNG panels
(:mod:`pcreg.viz.panels`), and the self-contained interactive HTML report
(:mod:`pcreg.viz.report`)."""

from pcreg.viz.panels import (
    alignment_panels,
    correspondence_panel,
    pair_legend,
    save_alignment_png,
    save_panels_png,
)
from pcreg.viz.render import render_clouds

__all__ = [
    "alignment_panels",
    "correspondence_panel",
    "pair_legend",
    "render_clouds",
    "save_alignment_png",
    "save_panels_png",
]
