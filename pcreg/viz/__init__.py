"""Pictures: headless Open3D renders of point clouds, composed into PNG panels."""

from pcreg.viz.render import (
    alignment_panels,
    correspondence_panel,
    render_clouds,
    save_alignment_png,
    save_panels_png,
)

__all__ = [
    "alignment_panels",
    "correspondence_panel",
    "render_clouds",
    "save_alignment_png",
    "save_panels_png",
]
