"""Pictures: headless Open3D renders of point clouds, composed into PNG panels."""

from pcreg.viz.render import render_clouds, save_alignment_png

__all__ = ["render_clouds", "save_alignment_png"]
