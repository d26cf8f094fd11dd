"""Writers of point-cloud files as real tools lay them out, for the reader tests: PCD of any
DATA kind, field set and organised shape (PCL's layout), written here so that the tests own
every byte (Open3D's writer cannot make an organised cloud)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np


def lzf_literals(raw: bytes) -> bytes:
    """A valid LZF stream of ``raw`` made of literal runs only (no back-references)."""
    out = bytearray()
    for i in range(0, len(raw), 32):
        chunk = raw[i : i + 32]
        out.append(len(chunk) - 1)
        out += chunk
    return bytes(out)


def pcd_bytes(
    columns: dict[str, np.ndarray],
    kind: str = "binary",
    *,
    width: int | None = None,
    height: int = 1,
    points: int | None = None,
) -> bytes:
    """A PCD v0.7 of ``columns`` (name -> ``(N,)`` array, its dtype giving SIZE and TYPE),
    DATA ``kind``; WIDTH defaults to N / HEIGHT, POINTS to N."""
    names = list(columns)
    n = len(next(iter(columns.values())))
    width = n // height if width is None else width
    points = n if points is None else points
    dtypes = [np.dtype(columns[k].dtype) for k in names]
    header = [
        "# .PCD v0.7 - Point Cloud Data file format",
        "VERSION 0.7",
        "FIELDS " + " ".join(names),
        "SIZE " + " ".join(str(d.itemsize) for d in dtypes),
        "TYPE " + " ".join(d.kind.upper() for d in dtypes),
        "COUNT " + " ".join("1" for _ in names),
        f"WIDTH {width}",
        f"HEIGHT {height}",
        "VIEWPOINT 0 0 0 1 0 0 0",
        f"POINTS {points}",
        f"DATA {kind}",
    ]
    head = ("\n".join(header) + "\n").encode("ascii")
    if kind == "ascii":
        rows = [
            " ".join(repr(float(columns[k][i])) if d.kind == "f" else str(int(columns[k][i]))
                     for k, d in zip(names, dtypes, strict=True))
            for i in range(n)
        ]  # fmt: skip
        return head + ("\n".join(rows) + "\n").encode("ascii")
    if kind == "binary":
        table = np.empty(n, [(k, d.newbyteorder("<")) for k, d in zip(names, dtypes, strict=True)])
        for k in names:
            table[k] = columns[k]
        return head + table.tobytes()
    raw = b"".join(np.ascontiguousarray(columns[k], dtypes[i].newbyteorder("<")).tobytes()
                   for i, k in enumerate(names))  # fmt: skip
    packed = lzf_literals(raw)
    return head + struct.pack("<II", len(packed), len(raw)) + packed


def write_pcd(path: Path, columns: dict[str, np.ndarray], kind: str = "binary", **kw) -> Path:
    path.write_bytes(pcd_bytes(columns, kind, **kw))
    return path


def xyz_columns(xyz: np.ndarray, dtype=np.float32) -> dict[str, np.ndarray]:
    return {a: xyz[:, i].astype(dtype) for i, a in enumerate("xyz")}


def depth_image_cloud(
    height: int = 480, width: int = 640, *, hole_fraction: float = 0.3, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """An organised RGB-D-like cloud ``(H*W, 3) float32`` (a wall 1.5-3 m away seen by a
    pinhole camera) whose pixels without depth are NaN, and the mask of valid pixels."""
    rng = np.random.default_rng(seed)
    v, u = np.mgrid[0:height, 0:width]
    z = 1.5 + 1.5 * (u / width) + 0.01 * rng.standard_normal((height, width))
    x = (u - width / 2) / 525.0 * z
    y = (v - height / 2) / 525.0 * z
    xyz = np.stack([x, y, z], axis=-1).reshape(-1, 3).astype(np.float32)
    valid = rng.random(height * width) >= hole_fraction
    xyz[~valid] = np.nan
    return xyz, valid


def ply_bytes(columns: dict[str, np.ndarray], fmt: str = "binary_little_endian") -> bytes:
    """A PLY point cloud of ``columns`` (name -> ``(N,)`` array; float32 -> ``float``,
    float64 -> ``double``, uint8 -> ``uchar``, ...), ``fmt`` ascii or binary of either order."""
    types = {"f4": "float", "f8": "double", "u1": "uchar", "u2": "ushort", "i4": "int"}
    names = list(columns)
    n = len(next(iter(columns.values())))
    dtypes = [np.dtype(columns[k].dtype) for k in names]
    header = ["ply", f"format {fmt} 1.0", f"element vertex {n}"]
    header += [f"property {types[d.str[1:]]} {k}" for k, d in zip(names, dtypes, strict=True)]
    head = ("\n".join([*header, "end_header"]) + "\n").encode("ascii")
    if fmt == "ascii":
        rows = [" ".join(repr(columns[k][i].item()) for k in names) for i in range(n)]
        return head + ("\n".join(rows) + "\n").encode("ascii")
    order = "<" if fmt == "binary_little_endian" else ">"
    table = np.empty(n, [(k, d.newbyteorder(order)) for k, d in zip(names, dtypes, strict=True)])
    for k in names:
        table[k] = columns[k]
    return head + table.tobytes()
