"""The harness's inputs: the real pairs with their ground truth, and writers of every point
format pcreg reads (written here with numpy / laspy, the way a user's own tools would).

Ground truth (``ref = T @ src``):

* 3DMatch demo pair (``geotransformer_repo/demo``): ``gt.npy``;
* KITTI 00 frames 94 -> 95 (``kitti00_scancontext``): ``inv(Tr) @ inv(P95) @ P94 @ Tr`` from
  ``KITTI_00_gt_poses.txt`` and the Velodyne-to-camera ``Tr`` of ``pairs.json``.
"""

from __future__ import annotations

import io
import json
import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("PCREG_SHARED_DATA", REPO.parent / "shared" / "data"))
DEMO = "geotransformer_repo/demo"
KITTI = "kitti00_scancontext"

#: format name -> file extension
EXT = {
    "ply-ascii": ".ply",
    "ply-binary": ".ply",
    "ply-double": ".ply",
    "pcd-ascii": ".pcd",
    "pcd-binary": ".pcd",
    "pcd-double": ".pcd",
    "npy": ".npy",
    "npy32": ".npy",
    "npz": ".npz",
    "bin": ".bin",
    "xyz": ".xyz",
    "txt": ".txt",
    "csv": ".csv",
    "las": ".las",
    "laz": ".laz",
}
TEXT_FORMATS = ("ply-ascii", "pcd-ascii", "xyz", "txt", "csv")


def translation(d) -> np.ndarray:
    t = np.eye(4)
    t[:3, 3] = d
    return t


def scaling(s: float) -> np.ndarray:
    return np.diag([s, s, s, 1.0])


def apply(t: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return pts @ t[:3, :3].T + t[:3, 3]


# ---- writers --------------------------------------------------------------------------------


def _rows(pts: np.ndarray, sep: str = " ", fmt: str = "%.6f", extra: str = "") -> bytes:
    buf = io.StringIO()
    np.savetxt(buf, pts, fmt=fmt, delimiter=sep)
    text = buf.getvalue()
    if extra:
        text = "".join(line + extra + "\n" for line in text.splitlines())
    return text.encode()


def ply_bytes(pts: np.ndarray, binary: bool, dtype=np.float32) -> bytes:
    kind = "double" if np.dtype(dtype) == np.float64 else "float"
    head = (
        "ply\nformat " + ("binary_little_endian" if binary else "ascii") + " 1.0\n"
        "comment written by the pcreg CLI harness\n"
        f"element vertex {len(pts)}\n"
        f"property {kind} x\nproperty {kind} y\nproperty {kind} z\nend_header\n"
    ).encode()
    if binary:
        return head + np.ascontiguousarray(pts, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
    return head + _rows(pts, fmt="%.9g" if kind == "float" else "%.17g")


def pcd_bytes(pts: np.ndarray, binary: bool, dtype=np.float32) -> bytes:
    size = np.dtype(dtype).itemsize
    n = len(pts)
    head = (
        "# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\nFIELDS x y z\n"
        f"SIZE {size} {size} {size}\nTYPE F F F\nCOUNT 1 1 1\nWIDTH {n}\nHEIGHT 1\n"
        f"VIEWPOINT 0 0 0 1 0 0 0\nPOINTS {n}\nDATA {'binary' if binary else 'ascii'}\n"
    ).encode()
    if binary:
        return head + np.ascontiguousarray(pts, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
    return head + _rows(pts, fmt="%.9g")


def las_bytes(pts: np.ndarray, compressed: bool, scale: float | None = None, offset=None) -> bytes:
    import laspy

    pts = np.asarray(pts, np.float64)
    header = laspy.LasHeader(point_format=3, version="1.2")
    lo, hi = pts.min(0), pts.max(0)
    if scale is None:  # 0.1 mm, coarser when the int32 range needs it
        scale = max(1e-4, float((hi - lo).max()) / 2.0e9)
    header.offsets = np.floor(lo) if offset is None else np.asarray(offset, np.float64)
    header.scales = np.array([scale] * 3)
    las = laspy.LasData(header)
    las.x, las.y, las.z = pts[:, 0], pts[:, 1], pts[:, 2]
    buf = io.BytesIO()
    las.write(buf, do_compress=compressed)
    return buf.getvalue()


def cloud_bytes(pts: np.ndarray, fmt: str, **kw) -> bytes:
    """``pts (N, 3)`` (or ``(N, 4)`` for ``bin``) in format ``fmt`` (a key of :data:`EXT`)."""
    pts = np.asarray(pts)
    if fmt in ("ply-ascii", "ply-binary", "ply-double"):
        return ply_bytes(pts, fmt != "ply-ascii", np.float64 if fmt == "ply-double" else np.float32)
    if fmt in ("pcd-ascii", "pcd-binary", "pcd-double"):
        return pcd_bytes(pts, fmt != "pcd-ascii", np.float64 if fmt == "pcd-double" else np.float32)
    if fmt in ("npy", "npy32"):
        buf = io.BytesIO()
        np.save(buf, pts.astype(np.float32 if fmt == "npy32" else np.float64))
        return buf.getvalue()
    if fmt == "npz":
        buf = io.BytesIO()
        np.savez(buf, points=pts.astype(np.float64))
        return buf.getvalue()
    if fmt == "bin":
        if pts.shape[1] == 3:
            pts = np.hstack([pts, np.zeros((len(pts), 1))])
        return np.ascontiguousarray(pts, dtype="<f4").tobytes()
    if fmt == "xyz":
        return _rows(pts)
    if fmt == "txt":
        return _rows(pts, extra=" 0.5")  # a fourth column (intensity), as scanners write
    if fmt == "csv":
        return b"x,y,z\n" + _rows(pts, sep=",")
    if fmt in ("las", "laz"):
        return las_bytes(pts, fmt == "laz", **kw)
    raise ValueError(fmt)


# ---- byte-level corruption -------------------------------------------------------------------


def rng_bytes(n: int, seed: int) -> bytes:
    return np.random.default_rng(seed).bytes(n)


def corrupt_middle(data: bytes, fmt: str, seed: int = 0) -> bytes:
    """Text formats: the middle data line replaced by a non-numeric one; binary formats: 64
    random bytes written over the middle of the file."""
    if fmt in TEXT_FORMATS:
        lines = data.split(b"\n")
        mid = len(lines) // 2
        lines[mid] = b"1.5,abc,2.5" if fmt == "csv" else b"1.5 abc 2.5"
        return b"\n".join(lines)
    out = bytearray(data)
    mid = len(out) // 2
    out[mid : mid + 64] = rng_bytes(64, seed)
    return bytes(out)


def npy_with_shape(data: bytes, shape: tuple[int, ...]) -> bytes:
    """An .npy file whose header claims ``shape`` over the original data bytes."""
    f = io.BytesIO(data)
    version = np.lib.format.read_magic(f)
    if version != (1, 0):
        raise ValueError(version)
    _, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    body = data[f.tell() :]
    out = io.BytesIO()
    header = {
        "descr": np.lib.format.dtype_to_descr(dtype),
        "fortran_order": fortran,
        "shape": shape,
    }
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue() + body


def header_lie(data: bytes, fmt: str, n: int, how: str) -> bytes:
    """``data`` (``n`` points) with a header claiming more (``larger``: n + 100), fewer
    (``smaller``: n - 100) or absurdly many (``huge``) points."""
    count = {"larger": n + 100, "smaller": n - 100, "huge": 10**12}[how]
    if fmt.startswith("ply"):
        return re.sub(rb"element vertex \d+", b"element vertex %d" % count, data, count=1)
    if fmt.startswith("pcd"):
        data = re.sub(rb"\nWIDTH \d+", b"\nWIDTH %d" % count, data, count=1)
        return re.sub(rb"\nPOINTS \d+", b"\nPOINTS %d" % count, data, count=1)
    if fmt in ("npy", "npy32"):
        return npy_with_shape(data, (count, 3))
    if fmt == "npz":
        import zipfile

        with zipfile.ZipFile(io.BytesIO(data)) as z:
            inner = z.read("points.npy")
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("points.npy", npy_with_shape(inner, (count, 3)))
        return buf.getvalue()
    if fmt in ("las", "laz"):
        out = bytearray(data)
        struct.pack_into("<I", out, 107, min(count, 0xFFFFFFFF))  # legacy point count (1.2)
        return bytes(out)
    raise ValueError(fmt)


def las_patch_scale(data: bytes, scale: float) -> bytes:
    """A LAS 1.2 file with its three scale factors (header bytes 131-154) set to ``scale``."""
    out = bytearray(data)
    struct.pack_into("<3d", out, 131, scale, scale, scale)
    return bytes(out)


# ---- the real pairs -------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    name: str
    src_path: Path
    ref_path: Path
    src: np.ndarray  # (N, 3) float64
    ref: np.ndarray
    gt: np.ndarray  # T_ref_src
    rte_max: float


class Workspace:
    """Session-wide inputs: the real pairs, and generated files cached under ``root``."""

    def __init__(self, root: Path, data: Path = SHARED_DATA) -> None:
        self.root = root
        self.data = data
        self.files = root / "files"
        self.files.mkdir(parents=True, exist_ok=True)

    # the real data
    @cached_property
    def demo(self) -> Pair:
        d = self.data / DEMO
        return Pair(
            "demo",
            d / "src.npy",
            d / "ref.npy",
            np.load(d / "src.npy").astype(np.float64),
            np.load(d / "ref.npy").astype(np.float64),
            np.load(d / "gt.npy").astype(np.float64),
            0.3,
        )

    @cached_property
    def kitti(self) -> Pair:
        d = self.data / KITTI
        tr = np.asarray(json.loads((d / "pairs.json").read_text())["Tr_velo_to_cam0"])
        rows = np.loadtxt(d / "KITTI_00_gt_poses.txt")
        cam = np.tile(np.eye(4), (len(rows), 1, 1))
        cam[:, :3, :4] = rows.reshape(-1, 3, 4)
        gt = np.linalg.inv(tr) @ np.linalg.inv(cam[95]) @ cam[94] @ tr  # scan 94 -> scan 95
        src = np.fromfile(d / "000094.bin", dtype=np.float32).reshape(-1, 4)
        ref = np.fromfile(d / "000095.bin", dtype=np.float32).reshape(-1, 4)
        return Pair(
            "kitti",
            d / "000094.bin",
            d / "000095.bin",
            src[:, :3].astype(np.float64),
            ref[:, :3].astype(np.float64),
            gt,
            0.5,
        )

    def pair(self, name: str) -> Pair:
        return self.demo if name == "demo" else self.kitti

    # generated files
    def cached(self, name: str | bytes, make: Callable[[], bytes]) -> Path:
        """``files/<name>`` holding ``make()``, written once per session."""
        path = Path(os.fsdecode(self.files)) / os.fsdecode(name)
        if not path.exists():
            tmp = path.with_name("." + path.name + ".part")
            tmp.write_bytes(make())
            tmp.replace(path)
        return path

    def cloud(self, name: str, fmt: str, points: Callable[[], np.ndarray], **kw) -> Path:
        return self.cached(name + EXT[fmt], lambda: cloud_bytes(points(), fmt, **kw))

    def transform_file(self, name: str, matrix: np.ndarray) -> Path:
        return self.cached(
            name, lambda: "\n".join(" ".join(f"{v:.17g}" for v in row) for row in matrix).encode()
        )

    @cached_property
    def tiny_checkpoint(self) -> Path:
        """A randomly initialised registration network saved as a loadable checkpoint (a user's
        badly trained model: its estimates are meaningless)."""
        path = self.files / "tiny.pt"
        if not path.exists():
            from tiny_model import save_tiny_checkpoint

            save_tiny_checkpoint(path)
        return path

    def checkpoint_variant(self, name: str, edit: Callable[[dict], dict]) -> Path:
        """The tiny checkpoint's payload changed by ``edit``, saved with torch.save."""

        def make() -> bytes:
            import torch

            payload = torch.load(self.tiny_checkpoint, map_location="cpu", weights_only=True)
            buf = io.BytesIO()
            torch.save(edit(payload), buf)
            return buf.getvalue()

        return self.cached(name, make)
