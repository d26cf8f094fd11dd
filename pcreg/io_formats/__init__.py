"""Strict parsers of the point-cloud formats with a header: PLY, PCD and LAS/LAZ; E57 scans
(through pye57, :mod:`pcreg.io_formats.e57`); PointCloud2 messages of ROS 1 and ROS 2 bags
(through rosbags, :mod:`pcreg.io_formats.rosbag`); meshes (:mod:`pcreg.io_formats.mesh`).

Each reader returns a :class:`RawCloud`: the file's x, y, z as an ``(N, 3) float64`` array
(values stored as float32 or integers convert exactly), with the points the format marks
invalid and the organised shape where there is one; or it raises
:class:`pcreg.errors.CorruptFileError` with a one-line message ``"<path>: <problem>"``.
They never pad, never guess and never print:

* the point count of the header is checked against the data actually present, before
  anything is allocated; a truncated file, a short or long ASCII row, a non-numeric token or
  a missing row is an error naming what is wrong (and, for text, the line);
* x, y and z are taken by name, whatever type the header declares for them;
* other elements of a PLY file (the faces of a mesh, before or after the vertices) are walked
  over and checked for size, not read;
* non-finite values (``nan``, ``inf``, ``1e999``) are returned as such, and the points a
  format marks invalid (an organised cloud's ``(0, 0, 0)`` pixels) are flagged, for
  :func:`pcreg.io.read_points` to drop and count (or refuse, under ``nan_policy="error"``).

PLY and PCD are parsed with numpy here rather than by Open3D, whose readers zero-pad
truncated or corrupt files (sometimes with uninitialised rows), print to stderr and still
return a cloud. Binary-compressed PCD is decompressed here too (LZF), and its declared sizes
are checked. LAS/LAZ go through laspy, with the header's scales and offsets and its point
count checked and laspy's warnings and log records kept off the terminal.
"""

from __future__ import annotations

from pcreg.io_formats._common import RawCloud
from pcreg.io_formats.e57 import read_e57
from pcreg.io_formats.las import read_las
from pcreg.io_formats.mesh import MESH_FORMATS, ply_mesh_cloud, read_mesh
from pcreg.io_formats.pcd import lzf_decompress, read_pcd
from pcreg.io_formats.ply import read_ply, write_ply
from pcreg.io_formats.rosbag import ROS_FORMATS, is_rosbag2_dir, read_rosbag

__all__ = [
    "MESH_FORMATS",
    "ROS_FORMATS",
    "RawCloud",
    "is_rosbag2_dir",
    "lzf_decompress",
    "ply_mesh_cloud",
    "read_e57",
    "read_las",
    "read_mesh",
    "read_pcd",
    "read_ply",
    "read_rosbag",
    "write_ply",
]
