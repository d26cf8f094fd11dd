"""The hostile invocations of the ``pcreg`` command line, generated per class.

Classes (the "never silently wrong" issue):

1. ``georef``: the real pairs moved to georeferenced coordinates, in four formats;
2. ``corrupt``: corrupt / truncated / lying files of every format, and file-system hostility;
3. ``degenerate``: too few points, identical / collinear / coplanar points, absurd extents,
   mixed units, odd arrays;
4. ``args``: bad option values (voxel, device, model, method, orientation, memory, gt);
5. ``outputs``: output paths that must be refused before any work, and unwritable stdout;
6. ``view-odometry``: ``view --render`` with hostile transforms, ``odometry`` with bad scans;
7. ``subcommands``: ``batch`` / ``manifest`` / ``evaluate`` / ... with bad input.

Each :class:`Case` builds its :class:`~harness_run.Invocation` lazily (files are generated
when the case runs, into the session's workspace and the test's ``tmp_path``). ``fast`` cases
(one or two per class, small and quick) run in the default suite; the rest are ``slow``.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from harness_data import (
    EXT,
    Workspace,
    apply,
    cloud_bytes,
    corrupt_middle,
    header_lie,
    las_patch_scale,
    npy_with_shape,
    rng_bytes,
    scaling,
    translation,
)
from harness_run import Invocation

CLASSES = ("georef", "corrupt", "degenerate", "args", "outputs", "view-odometry", "subcommands")

Builder = Callable[[Workspace, Path], Invocation]


@dataclass(frozen=True)
class Case:
    id: str
    klass: str
    build: Builder
    fast: bool = False
    nonroot: bool = False  # meaningless as root (root reads and writes anything): skipped


CASES: list[Case] = []


def case(klass: str, cid: str, fast: bool = False, nonroot: bool = False):
    def register(build: Builder) -> Builder:
        CASES.append(Case(f"{klass}-{cid}", klass, build, fast, nonroot))
        return build

    return register


OK = frozenset({0})
BAD = frozenset({2})
NOT_REG = frozenset({3})
ANY = frozenset({0, 2, 3})  # exit 0 only with the correct transform


def s(p) -> str:
    return os.fspath(p)


def register_inv(
    ws: Workspace,
    pair: str,
    src,
    ref,
    *extra: str | bytes,
    allowed=OK,
    a_src=None,
    a_ref=None,
    gt: np.ndarray | str | None = "pair",
    json_out: bool = True,
    **kw,
) -> Invocation:
    """``pcreg register SRC REF [--json] EXTRA...`` judged against ``pair``'s ground truth."""
    p = ws.pair(pair)
    argv: list[str | bytes] = ["register", _arg(src), _arg(ref)]
    if json_out:
        argv.append("--json")
    argv += list(extra)
    truth = p.gt if isinstance(gt, str) else gt
    kw.setdefault("rte_max", p.rte_max)
    kw.setdefault("names", _names(src, ref))
    return Invocation(argv=argv, allowed=allowed, gt=truth, a_src=a_src, a_ref=a_ref, **kw)


def _arg(x) -> str | bytes:
    return x if isinstance(x, bytes) else s(x)


def _names(*paths) -> tuple[str, ...]:
    out = []
    for p in paths:
        if isinstance(p, bytes):
            continue
        name = Path(p).name
        if name:
            out.append(name)
    return tuple(out)


# =============================================================================================
# 1. georeferenced coordinates
# =============================================================================================

OFFSETS = {
    "1e3": (1e3, 1e3, 1e3),
    "1e6": (1e6, 1e6, 1e6),
    "utm": (5e5, 4.2e6, 0.0),
    "1e9": (1e9, 1e9, 1e9),
}
GEO_FORMATS = ("npy", "ply-double", "xyz", "las")
GEO_FAST = {("demo", "utm", "npy"), ("kitti", "1e9", "las")}


def _georef_files(ws: Workspace, pair: str, off: str, fmt: str) -> tuple[Path, Path, np.ndarray]:
    p = ws.pair(pair)
    a = translation(OFFSETS[off])
    src = ws.cloud(f"geo_{pair}_{off}_src", fmt, lambda: apply(a, p.src))
    ref = ws.cloud(f"geo_{pair}_{off}_ref", fmt, lambda: apply(a, p.ref))
    return src, ref, a


def _georef_case(pair: str, off: str, fmt: str, extra: tuple[str, ...] = (), tag: str = ""):
    @case("georef", f"{pair}-{off}-{fmt}{tag}", fast=(pair, off, fmt) in GEO_FAST and not tag)
    def build(ws, tmp):
        src, ref, a = _georef_files(ws, pair, off, fmt)
        return register_inv(ws, pair, src, ref, *extra, allowed=frozenset({0, 2}), a_src=a, a_ref=a)


for _pair in ("demo", "kitti"):
    for _off in OFFSETS:
        for _fmt in GEO_FORMATS:
            _georef_case(_pair, _off, _fmt)
        # the classical pipeline with ICP on the same inputs
        _georef_case(_pair, _off, "npy", ("--method", "fpfh-ransac", "--icp"), "-fpfh-icp")
    for _fmt in ("laz", "pcd-double"):
        _georef_case(_pair, "utm", _fmt)
    _georef_case(_pair, "utm", "npy", ("--icp",), "-icp")
    _georef_case(_pair, "1e6", "ply-double", ("--out", "T.txt", "--render", "a.png"), "-outputs")


def _georef_mixed(pair: str, off: str):
    # only the reference georeferenced: the source stays local (the true motion is huge)
    @case("georef", f"{pair}-ref-only-{off}")
    def build(ws, tmp):
        p = ws.pair(pair)
        a = translation(OFFSETS[off])
        ref = ws.cloud(f"geo_{pair}_{off}_ref", "npy", lambda: apply(a, p.ref))
        return register_inv(ws, pair, p.src_path, ref, allowed=ANY, a_ref=a)


for _pair in ("demo", "kitti"):
    _georef_mixed(_pair, "1e3")
    _georef_mixed(_pair, "utm")


@case("georef", "demo-utm-float32-npy")
def _(ws, tmp):
    # float32 at UTM northings: 0.5 m steps. The file itself is lossy: refuse or be right.
    p = ws.demo
    a = translation(OFFSETS["utm"])
    src = ws.cloud("geo_demo_utm32_src", "npy32", lambda: apply(a, p.src))
    ref = ws.cloud("geo_demo_utm32_ref", "npy32", lambda: apply(a, p.ref))
    return register_inv(ws, "demo", src, ref, allowed=ANY, a_src=a, a_ref=a)


@case("georef", "demo-1e3-float32-npy")
def _(ws, tmp):
    p = ws.demo
    a = translation(OFFSETS["1e3"])
    src = ws.cloud("geo_demo_1e3_32_src", "npy32", lambda: apply(a, p.src))
    ref = ws.cloud("geo_demo_1e3_32_ref", "npy32", lambda: apply(a, p.ref))
    return register_inv(ws, "demo", src, ref, allowed=frozenset({0, 2}), a_src=a, a_ref=a)


@case("georef", "kitti-utm-bin-float32")
def _(ws, tmp):
    # KITTI's own float32 format at UTM coordinates (0.25-0.5 m quantisation)
    p = ws.kitti
    a = translation(OFFSETS["utm"])
    src = ws.cloud("geo_kitti_utm_src", "bin", lambda: apply(a, p.src))
    ref = ws.cloud("geo_kitti_utm_ref", "bin", lambda: apply(a, p.ref))
    return register_inv(ws, "kitti", src, ref, allowed=ANY, a_src=a, a_ref=a)


# =============================================================================================
# 2. corrupt / truncated files, file-system hostility
# =============================================================================================

CORRUPT_FORMATS = (
    "ply-ascii",
    "ply-binary",
    "pcd-ascii",
    "pcd-binary",
    "npy",
    "npz",
    "bin",
    "xyz",
    "txt",
    "csv",
    "las",
    "laz",
)
HEADER_FORMATS = ("ply-ascii", "ply-binary", "pcd-ascii", "pcd-binary", "npy", "npz", "las", "laz")
FLOAT_FORMATS = tuple(f for f in CORRUPT_FORMATS if f not in ("las", "laz"))
WRONG_EXT = {
    "ply-ascii": ".xyz",
    "ply-binary": ".pcd",
    "pcd-ascii": ".ply",
    "pcd-binary": ".npy",
    "npy": ".bin",
    "npz": ".npy",
    "bin": ".npy",
    "xyz": ".bin",
    "txt": ".las",
    "csv": ".xyz",
    "las": ".ply",
    "laz": ".las",
}
CORRUPT_FAST = {
    ("ply-binary", "trunc50"),
    ("pcd-ascii", "header-larger"),
    ("npy", "nan-strict"),
    ("laz", "header-huge"),
    ("las", "garbage"),
    ("ply-ascii", "nan-drop"),
}


def _base(ws: Workspace, fmt: str) -> Path:
    return ws.cloud(f"base_{fmt.replace('-', '_')}", fmt, lambda: ws.demo.src)


def _corrupt_case(
    fmt: str,
    how: str,
    allowed: frozenset[int],
    make,
    *,
    strict: bool = False,
    ext: str | None = None,
    no_answer: bool = False,
):
    @case("corrupt", f"{fmt}-{how}", fast=(fmt, how) in CORRUPT_FAST)
    def build(ws, tmp):
        data = _base(ws, fmt).read_bytes()
        path = tmp / ("scan" + (EXT[fmt] if ext is None else ext))
        path.write_bytes(make(ws, data))
        extra = ("--strict-input",) if strict else ()
        return register_inv(
            ws,
            "demo",
            path,
            ws.demo.ref_path,
            *extra,
            allowed=allowed,
            names=(path.name,),
            no_answer=no_answer,
        )


def _nan_points(kind: str, count: int = 5):
    def make(ws: Workspace, fmt: str) -> bytes:
        pts = ws.demo.src.copy()
        pts[100 : 100 + count, 0] = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[kind]
        return cloud_bytes(pts, fmt)

    return make


for _fmt in CORRUPT_FORMATS:
    for _frac in (10, 50, 90):
        _corrupt_case(_fmt, f"trunc{_frac}", ANY, lambda ws, d, f=_frac: d[: len(d) * f // 100])
    _corrupt_case(_fmt, "corrupt-middle", ANY, lambda ws, d, f=_fmt: corrupt_middle(d, f))
    _corrupt_case(
        _fmt,
        "garbage",
        frozenset({2, 3}) if _fmt == "bin" else BAD,
        lambda ws, d: rng_bytes(len(d), 7),
        no_answer=True,
    )
    _corrupt_case(_fmt, "empty", BAD, lambda ws, d: b"")
    _corrupt_case(_fmt, "wrong-ext", ANY, lambda ws, d: d, ext=WRONG_EXT[_fmt])
    _corrupt_case(_fmt, "no-ext", BAD, lambda ws, d: d, ext="")
    _corrupt_case(_fmt, "upper-ext", OK, lambda ws, d: d, ext=EXT[_fmt].upper())
    if _fmt in HEADER_FORMATS:
        for _how in ("larger", "smaller", "huge"):
            _corrupt_case(
                _fmt,
                f"header-{_how}",
                ANY if _how == "smaller" else BAD,
                lambda ws, d, f=_fmt, h=_how: header_lie(d, f, len(ws.demo.src), h),
            )
    if _fmt in FLOAT_FORMATS:
        for _kind in ("nan", "inf"):
            _corrupt_case(  # invalid points are dropped by default; --strict-input refuses
                _fmt,
                f"{_kind}-strict",
                BAD,
                lambda ws, d, f=_fmt, k=_kind: _nan_points(k)(ws, f),
                strict=True,
            )
            _corrupt_case(
                _fmt, f"{_kind}-drop", ANY, lambda ws, d, f=_fmt, k=_kind: _nan_points(k)(ws, f)
            )


@case("corrupt", "npy-all-nan-drop")
def _(ws, tmp):
    path = tmp / "allnan.npy"
    np.save(path, np.full((1000, 3), np.nan))
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD)


@case("corrupt", "xyz-overflow-1e999")
def _(ws, tmp):
    # a value beyond float64 in text: read as inf, so refused like one
    path = tmp / "overflow.xyz"
    data = bytearray(cloud_bytes(ws.demo.src, "xyz"))
    path.write_bytes(b"1e999 0 0\n" + bytes(data))
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD)


@case("corrupt", "ref-ply-binary-trunc50")
def _(ws, tmp):
    data = ws.cloud("base_ref_ply", "ply-binary", lambda: ws.demo.ref).read_bytes()
    path = tmp / "ref_cut.ply"
    path.write_bytes(data[: len(data) // 2])
    return register_inv(ws, "demo", ws.demo.src_path, path, allowed=ANY, names=(path.name,))


@case("corrupt", "ref-pcd-binary-nan")
def _(ws, tmp):
    pts = ws.demo.ref.copy()
    pts[7, 1] = np.nan
    path = tmp / "ref_nan.pcd"
    path.write_bytes(cloud_bytes(pts, "pcd-binary"))
    return register_inv(
        ws, "demo", ws.demo.src_path, path, "--strict-input", allowed=BAD, names=(path.name,)
    )


@case("corrupt", "kitti-bin-trunc-odd")
def _(ws, tmp):
    data = ws.kitti.src_path.read_bytes()
    path = tmp / "000094.bin"
    path.write_bytes(data[: len(data) // 2 + 5])  # not a multiple of 16 bytes
    return register_inv(ws, "kitti", path, ws.kitti.ref_path, allowed=BAD, names=(path.name,))


@case("corrupt", "kitti-bin-trunc-aligned")
def _(ws, tmp):
    data = ws.kitti.src_path.read_bytes()
    path = tmp / "000094.bin"
    path.write_bytes(data[: (len(data) // 2) // 16 * 16])  # half a sweep, whole records
    return register_inv(ws, "kitti", path, ws.kitti.ref_path, allowed=ANY, names=(path.name,))


@case("corrupt", "pcd-binary-compressed-garbage")
def _(ws, tmp):
    head = _base(ws, "pcd-binary").read_bytes().split(b"DATA binary\n")[0]
    path = tmp / "comp.pcd"
    path.write_bytes(
        head + b"DATA binary_compressed\n" + struct_pack_ii(100, 1_000_000) + rng_bytes(100, 3)
    )
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD, names=(path.name,))


def struct_pack_ii(a: int, b: int) -> bytes:
    import struct

    return struct.pack("<II", a, b)


@case("corrupt", "ply-mesh-with-faces")
def _(ws, tmp):
    # a valid mesh (vertices + faces): the vertices are the cloud
    pts = ws.demo.src.astype(np.float32)
    head = (
        f"ply\nformat binary_little_endian 1.0\nelement vertex {len(pts)}\n"
        "property float x\nproperty float y\nproperty float z\nelement face 2\n"
        "property list uchar int vertex_indices\nend_header\n"
    ).encode()
    faces = b"".join(bytes([3]) + np.array(f, "<i4").tobytes() for f in ([0, 1, 2], [2, 3, 4]))
    path = tmp / "mesh.ply"
    path.write_bytes(head + pts.tobytes() + faces)
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=OK)


@case("corrupt", "ply-big-endian-lie")
def _(ws, tmp):
    # a little-endian body under a big-endian header: garbage floats
    data = (
        _base(ws, "ply-binary").read_bytes().replace(b"binary_little_endian", b"binary_big_endian")
    )
    path = tmp / "endian.ply"
    path.write_bytes(data)
    return register_inv(
        ws,
        "demo",
        path,
        ws.demo.ref_path,
        allowed=frozenset({2, 3}),
        no_answer=True,
        names=(path.name,),
    )


# ---- file-system hostility ---------------------------------------------------------------


@case("corrupt", "fs-missing-src", fast=True)
def _(ws, tmp):
    return register_inv(
        ws, "demo", tmp / "nope.ply", ws.demo.ref_path, allowed=BAD, names=("nope.ply",)
    )


@case("corrupt", "fs-missing-ref")
def _(ws, tmp):
    return register_inv(
        ws, "demo", ws.demo.src_path, tmp / "gone.npy", allowed=BAD, names=("gone.npy",)
    )


@case("corrupt", "fs-directory-src")
def _(ws, tmp):
    (tmp / "scan.ply").mkdir()
    return register_inv(
        ws, "demo", tmp / "scan.ply", ws.demo.ref_path, allowed=BAD, names=("scan.ply",)
    )


@case("corrupt", "fs-directory-ref-noext")
def _(ws, tmp):
    return register_inv(ws, "demo", ws.demo.src_path, tmp, allowed=BAD, names=(tmp.name,))


@case("corrupt", "fs-unreadable-file", nonroot=True)
def _(ws, tmp):
    path = tmp / "locked.npy"
    path.write_bytes(ws.demo.src_path.read_bytes())
    path.chmod(0)
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD, names=(path.name,))


@case("corrupt", "fs-unreadable-ply", nonroot=True)
def _(ws, tmp):
    path = tmp / "locked.ply"
    path.write_bytes(_base(ws, "ply-binary").read_bytes())
    path.chmod(0)
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD, names=(path.name,))


@case("corrupt", "fs-in-unreadable-dir", nonroot=True)
def _(ws, tmp):
    d = tmp / "closed"
    d.mkdir()
    path = d / "scan.npy"
    path.write_bytes(ws.demo.src_path.read_bytes())
    d.chmod(0)
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD, names=(path.name,))


@case("corrupt", "fs-name-too-long", fast=True)
def _(ws, tmp):
    path = tmp / ("a" * 300 + ".ply")
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD, names=("aaaa",))


@case("corrupt", "fs-path-too-long")
def _(ws, tmp):
    path = tmp / (("d" * 200 + "/") * 25 + "scan.npy")  # over PATH_MAX (4096)
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD, names=("scan.npy", "ddd"))


@case("corrupt", "fs-non-utf8-name-valid")
def _(ws, tmp):
    name = os.fsencode(tmp) + b"/nonutf8_\xff\xfe.npy"
    with open(name, "wb") as f:
        f.write(ws.demo.src_path.read_bytes())
    return register_inv(ws, "demo", name, ws.demo.ref_path, allowed=OK)


@case("corrupt", "fs-non-utf8-name-missing", fast=True)
def _(ws, tmp):
    name = os.fsencode(tmp) + b"/nonutf8_\xff\xfe.ply"
    return register_inv(ws, "demo", name, ws.demo.ref_path, allowed=BAD, names=("nonutf8_",))


@case("corrupt", "fs-non-utf8-name-corrupt")
def _(ws, tmp):
    name = os.fsencode(tmp) + b"/nonutf8_\xe9t\xe9.xyz"
    with open(name, "wb") as f:
        f.write(b"1 2 3\n4 5\n")
    return register_inv(ws, "demo", name, ws.demo.ref_path, allowed=BAD, names=("nonutf8_",))


@case("corrupt", "fs-newline-in-name-missing")
def _(ws, tmp):
    return register_inv(
        ws, "demo", tmp / "two\nlines.ply", ws.demo.ref_path, allowed=BAD, names=("two",)
    )


@case("corrupt", "fs-newline-in-name-corrupt")
def _(ws, tmp):
    path = tmp / "bad\nname.npy"
    path.write_bytes(b"\x93NUMPY garbage")
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD, names=("bad",))


@case("corrupt", "fs-unicode-and-space-name")
def _(ws, tmp):
    path = tmp / "scän 1 ✓.npy"
    path.write_bytes(ws.demo.src_path.read_bytes())
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=OK)


@case("corrupt", "fs-dash-name")
def _(ws, tmp):
    path = tmp / "-src.npy"
    path.write_bytes(ws.demo.src_path.read_bytes())
    inv = register_inv(
        ws, "demo", "-src.npy", ws.demo.ref_path, allowed=BAD, argparse=True, names=()
    )
    return inv


@case("corrupt", "fs-dash-name-after-double-dash")
def _(ws, tmp):
    path = tmp / "-src.npy"
    path.write_bytes(ws.demo.src_path.read_bytes())
    return Invocation(
        argv=["register", "--json", "--", "-src.npy", s(ws.demo.ref_path)],
        allowed=OK,
        gt=ws.demo.gt,
    )


@case("corrupt", "fs-symlink-loop")
def _(ws, tmp):
    (tmp / "loop.ply").symlink_to(tmp / "loop.ply")
    return register_inv(
        ws, "demo", tmp / "loop.ply", ws.demo.ref_path, allowed=BAD, names=("loop.ply",)
    )


@case("corrupt", "fs-dangling-symlink")
def _(ws, tmp):
    (tmp / "dangling.npy").symlink_to(tmp / "nowhere.npy")
    return register_inv(
        ws,
        "demo",
        tmp / "dangling.npy",
        ws.demo.ref_path,
        allowed=BAD,
        names=("dangling.npy", "nowhere.npy"),
    )


@case("corrupt", "fs-symlink-to-valid")
def _(ws, tmp):
    (tmp / "link.npy").symlink_to(ws.demo.src_path)
    return register_inv(ws, "demo", tmp / "link.npy", ws.demo.ref_path, allowed=OK)


@case("corrupt", "fs-fifo-input", fast=True)
def _(ws, tmp):
    os.mkfifo(tmp / "pipe.xyz")  # nothing ever writes to it: reading would block forever
    return register_inv(
        ws,
        "demo",
        tmp / "pipe.xyz",
        ws.demo.ref_path,
        allowed=BAD,
        names=("pipe.xyz",),
        max_wall_s=60,
    )


@case("corrupt", "fs-dev-zero-bin")
def _(ws, tmp):
    (tmp / "zero.bin").symlink_to("/dev/zero")  # endless zeros behind a KITTI name
    return register_inv(
        ws,
        "kitti",
        tmp / "zero.bin",
        ws.kitti.ref_path,
        allowed=BAD,
        names=("zero.bin",),
        max_wall_s=60,
    )


@case("corrupt", "fs-dev-null-npy")
def _(ws, tmp):
    (tmp / "null.npy").symlink_to("/dev/null")
    return register_inv(
        ws, "demo", tmp / "null.npy", ws.demo.ref_path, allowed=BAD, names=("null.npy",)
    )


@case("corrupt", "fs-proc-file-txt")
def _(ws, tmp):
    # a pseudo file (size 0 in stat, content on read)
    (tmp / "meminfo.txt").symlink_to("/proc/meminfo")
    return register_inv(
        ws, "demo", tmp / "meminfo.txt", ws.demo.ref_path, allowed=BAD, names=("meminfo.txt",)
    )


@case("corrupt", "fs-same-file-both")
def _(ws, tmp):
    return register_inv(
        ws, "demo", ws.demo.src_path, ws.demo.src_path, allowed=frozenset({0, 3}), gt=np.eye(4)
    )


# =============================================================================================
# 3. degenerate clouds
# =============================================================================================


def _array_case(
    cid: str,
    make,
    allowed,
    *,
    side: str = "src",
    fmt: str = "npy",
    fast=False,
    pair: str = "demo",
    extra: tuple[str, ...] = (),
    **kw,
):
    @case("degenerate", cid, fast=fast)
    def build(ws, tmp):
        p = ws.pair(pair)
        path = tmp / ("cloud" + EXT[fmt])
        path.write_bytes(cloud_bytes(make(ws), fmt))
        src, ref = (path, p.ref_path) if side == "src" else (p.src_path, path)
        kw.setdefault("names", (path.name,))
        return register_inv(ws, pair, src, ref, *extra, allowed=allowed, **kw)


for _n in (1, 2, 3, 99):
    for _side in ("src", "ref"):
        for _fmt in ("npy", "xyz"):
            _array_case(
                f"{_n}pts-{_side}-{_fmt}",
                lambda ws, n=_n: ws.demo.src[:n],
                BAD,
                side=_side,
                fmt=_fmt,
                fast=(_n, _side, _fmt) == (1, "src", "npy"),
            )
_array_case("99pts-fpfh", lambda ws: ws.demo.src[:99], BAD, extra=("--method", "fpfh-ransac"))
_array_case(
    "100pts-random",
    lambda ws: ws.demo.src[np.random.default_rng(0).choice(len(ws.demo.src), 100, replace=False)],
    ANY,
)
_array_case(
    "500pts-random",
    lambda ws: ws.demo.src[np.random.default_rng(1).choice(len(ws.demo.src), 500, replace=False)],
    ANY,
)
for _side in ("src", "ref"):
    _array_case(
        f"identical-{_side}",
        lambda ws: np.tile([[1.0, 2.0, 3.0]], (1000, 1)),
        BAD,
        side=_side,
        fast=_side == "src",
    )
_array_case(
    "identical-fpfh",
    lambda ws: np.tile([[1.0, 2.0, 3.0]], (1000, 1)),
    BAD,
    extra=("--method", "fpfh-ransac"),
)
_array_case("two-distinct-points", lambda ws: np.repeat([[0.0, 0, 0], [1.0, 1, 1]], 500, 0), BAD)
_array_case(
    "all-but-one-identical", lambda ws: np.vstack([np.zeros((999, 3)), [[5.0, 5.0, 5.0]]]), BAD
)
for _side in ("src", "ref"):
    _array_case(
        f"all-zero-bin-{_side}",
        lambda ws: np.zeros((1000, 4), np.float32),
        BAD,
        side=_side,
        fmt="bin",
        pair="kitti",
        fast=_side == "src",
    )


def _line(n=2000):
    t = np.linspace(0, 4, n)[:, None]
    return t * np.array([0.267, 0.535, 0.802]) + np.array([0.1, -0.2, 1.0])


def _plane(n=4000, seed=0):
    uv = np.random.default_rng(seed).uniform(0, 3, (n, 2))
    return np.column_stack([uv, np.full(n, 0.8)])


_array_case("collinear-src", lambda ws: _line(), frozenset({2, 3}), no_answer=True)
_array_case("coplanar-src", lambda ws: _plane(), frozenset({2, 3}), no_answer=True)
_array_case(
    "collinear-fpfh",
    lambda ws: _line(),
    frozenset({2, 3}),
    no_answer=True,
    extra=("--method", "fpfh-ransac"),
)
_array_case(
    "random-box-src",
    lambda ws: np.random.default_rng(2).uniform(-1.5, 1.5, (20000, 3)),
    frozenset({2, 3}),
    no_answer=True,
)
_array_case(
    "random-box-src-fpfh",
    lambda ws: np.random.default_rng(2).uniform(-1.5, 1.5, (20000, 3)),
    frozenset({2, 3}),
    no_answer=True,
    extra=("--method", "fpfh-ransac"),
)
_array_case(
    "gaussian-blob-src",
    lambda ws: np.random.default_rng(3).normal(0, 0.8, (20000, 3)),
    frozenset({2, 3}),
    no_answer=True,
)


def _both_case(cid: str, make_src, make_ref, allowed, *, fast=False, extra=(), fmt="npy", **kw):
    @case("degenerate", cid, fast=fast)
    def build(ws, tmp):
        src, ref = tmp / ("src" + EXT[fmt]), tmp / ("ref" + EXT[fmt])
        src.write_bytes(cloud_bytes(make_src(ws), fmt))
        ref.write_bytes(cloud_bytes(make_ref(ws), fmt))
        kw.setdefault("names", ("src" + EXT[fmt], "ref" + EXT[fmt]))
        return register_inv(ws, kw.pop("pair", "demo"), src, ref, *extra, allowed=allowed, **kw)


_MOTION = np.array(
    [[0.8, -0.6, 0.0, 0.3], [0.6, 0.8, 0.0, -0.2], [0.0, 0.0, 1.0, 0.1], [0, 0, 0, 1.0]]
)
_both_case(
    "collinear-both",
    lambda ws: _line(),
    lambda ws: apply(_MOTION, _line()),
    frozenset({2, 3}),
    gt=_MOTION,
    no_answer=True,
)
_both_case(
    "coplanar-both",
    lambda ws: _plane(),
    lambda ws: apply(_MOTION, _plane(seed=1)),
    frozenset({2, 3}),
    gt=_MOTION,
    no_answer=True,
)
_both_case(
    "coplanar-both-fpfh",
    lambda ws: _plane(),
    lambda ws: apply(_MOTION, _plane(seed=1)),
    frozenset({2, 3}),
    gt=_MOTION,
    no_answer=True,
    extra=("--method", "fpfh-ransac"),
)
_both_case(
    "random-boxes-both",
    lambda ws: np.random.default_rng(4).uniform(0, 3, (20000, 3)),
    lambda ws: np.random.default_rng(5).uniform(0, 3, (20000, 3)),
    frozenset({2, 3}),
    no_answer=True,
)


def _spread(seed):
    return lambda ws: np.random.default_rng(seed).uniform(0, 1e9, (20000, 3))


for _tag, _extra in (
    ("", ()),
    ("-fpfh", ("--method", "fpfh-ransac")),
    ("-indoor", ("--model", "indoor")),
    ("-outdoor", ("--model", "outdoor")),
    ("-icp", ("--icp",)),
):
    _both_case(
        f"spread-1e9{_tag}",
        _spread(6),
        _spread(7),
        BAD,
        names=("src.npy", "ref.npy", "voxel"),  # the memory guard, or the voxel-count guard
        extra=_extra,
        fast=not _tag,
        max_wall_s=60,
        no_answer=True,
    )
_both_case(
    "spread-1e6",
    lambda ws: np.random.default_rng(8).uniform(0, 1e6, (20000, 3)),
    lambda ws: np.random.default_rng(9).uniform(0, 1e6, (20000, 3)),
    frozenset({2, 3}),
    max_wall_s=120,
    no_answer=True,
)
_both_case(
    "spread-1e9-same-cloud",
    _spread(6),
    _spread(6),
    frozenset({0, 2, 3}),
    gt=np.eye(4),
    max_wall_s=120,
)


def _mm_case(cid, side, extra=(), fast=False):
    @case("degenerate", cid, fast=fast)
    def build(ws, tmp):
        p = ws.demo
        mm = tmp / f"{side}_mm.npy"
        np.save(mm, (p.src if side == "src" else p.ref) * 1000.0)
        src, ref = (mm, p.ref_path) if side == "src" else (p.src_path, mm)
        return register_inv(ws, "demo", src, ref, *extra, allowed=BAD, words=("scales differ",))


_mm_case("mm-vs-m-src", "src", fast=True)
_mm_case("mm-vs-m-ref", "ref")
_mm_case("mm-vs-m-fpfh", "src", ("--method", "fpfh-ransac"))
_mm_case("mm-vs-m-indoor", "src", ("--model", "indoor"))
_mm_case("mm-vs-m-outdoor", "ref", ("--model", "outdoor"))


def _scaled_case(cid, factor, extra=(), fmt="npy", pair="demo", dtype=None):
    @case("degenerate", cid)
    def build(ws, tmp):
        p = ws.pair(pair)
        a = scaling(factor)
        src, ref = tmp / ("src" + EXT[fmt]), tmp / ("ref" + EXT[fmt])
        for path, pts in ((src, p.src), (ref, p.ref)):
            pts = apply(a, pts)
            if dtype is not None:
                np.save(path, np.round(pts).astype(dtype))
            else:
                path.write_bytes(cloud_bytes(pts, fmt))
        return register_inv(
            ws, pair, src, ref, *extra, allowed=ANY, a_src=a, a_ref=a, names=(src.name, ref.name)
        )


_scaled_case("both-mm", 1000.0)
_scaled_case("both-mm-fpfh-icp", 1000.0, ("--method", "fpfh-ransac", "--icp"))
_scaled_case("both-mm-indoor", 1000.0, ("--model", "indoor"))
_scaled_case("both-mm-int32", 1000.0, dtype=np.int32)
_scaled_case("both-mm-xyz", 1000.0, fmt="xyz")
_scaled_case("kitti-both-mm", 1000.0, pair="kitti")
_scaled_case("both-km", 1e-3)
_scaled_case("both-micro", 1e-6)
_scaled_case("both-x100", 100.0)


def _las_scale_case(cid, scale, allowed, fast=False, no_answer=False):
    @case("degenerate", cid, fast=fast)
    def build(ws, tmp):
        path = tmp / "scaled.las"
        path.write_bytes(las_patch_scale(_base(ws, "las").read_bytes(), scale))
        return register_inv(
            ws,
            "demo",
            path,
            ws.demo.ref_path,
            allowed=allowed,
            names=(path.name,),
            no_answer=no_answer,
        )


_las_scale_case("las-scale-0", 0.0, BAD, fast=True)
_las_scale_case("las-scale-nan", float("nan"), BAD)
_las_scale_case("las-scale-1e300", 1e300, BAD)
_las_scale_case("las-scale-negative", -1e-4, frozenset({2, 3}), no_answer=True)  # a mirror


@case("degenerate", "laz-scale-0")
def _(ws, tmp):
    path = tmp / "scaled.laz"
    pts = ws.demo.src
    path.write_bytes(las_bytes_scale0(pts))
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD, names=(path.name,))


def las_bytes_scale0(pts) -> bytes:
    data = cloud_bytes(pts, "laz")
    return las_patch_scale(data, 0.0)


@case("degenerate", "same-cloud-shifted-1m")
def _(ws, tmp):
    ref = tmp / "ref.npy"
    np.save(ref, ws.demo.src + np.array([1.0, 0.0, 0.0]))
    return register_inv(
        ws,
        "demo",
        ws.demo.src_path,
        ref,
        allowed=frozenset({0, 3}),
        gt=translation((1.0, 0.0, 0.0)),
    )


@case("degenerate", "swapped-pair")
def _(ws, tmp):
    return register_inv(
        ws,
        "demo",
        ws.demo.ref_path,
        ws.demo.src_path,
        allowed=frozenset({0, 3}),
        gt=np.linalg.inv(ws.demo.gt),
    )


@case("degenerate", "kitti-same-scan")
def _(ws, tmp):
    return register_inv(
        ws, "kitti", ws.kitti.src_path, ws.kitti.src_path, allowed=frozenset({0, 3}), gt=np.eye(4)
    )


def _outlier_case(cid, where, count=1):
    @case("degenerate", cid)
    def build(ws, tmp):
        path = tmp / "outlier.npy"
        np.save(path, np.vstack([ws.demo.src, np.full((count, 3), where)]))
        return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=ANY)


_outlier_case("outlier-1e9", 1e9)
_outlier_case("outliers-1e6-x10", 1e6, 10)
_outlier_case("outlier-1e300", 1e300)
_outlier_case("outlier-neg-1e15", -1e15)


@case("degenerate", "two-million-points")
def _(ws, tmp):
    # a legitimately dense scan: 125 jittered copies of each point (2 M points, 48 MB)
    def dense(pts, seed):
        rng = np.random.default_rng(seed)
        return np.repeat(pts, 125, 0) + rng.normal(0, 0.002, (len(pts) * 125, 3))

    src, ref = tmp / "dense_src.npy", tmp / "dense_ref.npy"
    np.save(src, dense(ws.demo.src, 0))
    np.save(ref, dense(ws.demo.ref, 1))
    return register_inv(ws, "demo", src, ref, allowed=ANY)


def _npy_odd(cid, make, allowed=BAD, **kw):
    @case("degenerate", cid)
    def build(ws, tmp):
        path = tmp / "odd.npy"
        path.write_bytes(make(ws))
        kw.setdefault("names", ("odd.npy",))
        return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=allowed, **kw)


def _npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


_npy_odd("npy-2-columns", lambda ws: _npy(ws.demo.src[:, :2]))
_npy_odd("npy-3d-array", lambda ws: _npy(ws.demo.src[:, :, None]))
_npy_odd("npy-transposed", lambda ws: _npy(ws.demo.src.T.copy()))
_npy_odd("npy-scalar", lambda ws: _npy(np.float64(3.0)))
_npy_odd("npy-empty-0x3", lambda ws: _npy(np.zeros((0, 3))))
_npy_odd("npy-object-pickle", lambda ws: _npy(np.array([[1, 2, 3]] * 200, dtype=object)))
_npy_odd("npy-strings", lambda ws: _npy(ws.demo.src.astype("U12")))
_npy_odd("npy-bool", lambda ws: _npy(ws.demo.src > 0))
_npy_odd("npy-complex", lambda ws: _npy(ws.demo.src.astype(np.complex128)))
_npy_odd(
    "npy-structured", lambda ws: _npy(np.zeros(2000, dtype=[("x", "f8"), ("y", "f8"), ("z", "f8")]))
)
_npy_odd("npy-float16", lambda ws: _npy(ws.demo.src.astype(np.float16)), allowed=ANY)
_npy_odd("npy-longdouble-huge", lambda ws: _npy(np.full((500, 3), np.longdouble("1e4000"))))
_npy_odd(
    "npy-4-columns",
    lambda ws: _npy(np.hstack([ws.demo.src, np.ones((len(ws.demo.src), 1))])),
    allowed=OK,
)
_npy_odd("npy-big-endian", lambda ws: _npy(ws.demo.src.astype(">f8")), allowed=OK)
_npy_odd("npy-fortran-order", lambda ws: _npy(np.asfortranarray(ws.demo.src)), allowed=OK)
_npy_odd(
    "npy-uint8",
    lambda ws: _npy(np.random.default_rng(0).integers(0, 255, (5000, 3), dtype=np.uint8)),
    allowed=frozenset({2, 3}),
    no_answer=True,
)
_npy_odd("npz-two-arrays", lambda ws: _npz(a=ws.demo.src, b=ws.demo.ref), names=())
_npy_odd("npy-huge-shape-header", lambda ws: npy_with_shape(_npy(ws.demo.src), (2**40, 3)))


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


@case("degenerate", "npz-two-arrays-named")
def _(ws, tmp):
    path = tmp / "two.npz"
    path.write_bytes(_npz(a=ws.demo.src, b=ws.demo.ref))  # no 'points' key: ambiguous
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD, names=(path.name,))


@case("degenerate", "npz-empty-archive")
def _(ws, tmp):
    path = tmp / "none.npz"
    path.write_bytes(_npz())
    return register_inv(ws, "demo", path, ws.demo.ref_path, allowed=BAD, names=(path.name,))


@case("degenerate", "demo-vs-kitti")
def _(ws, tmp):
    return register_inv(
        ws, "demo", ws.demo.src_path, ws.kitti.ref_path, allowed=BAD, no_answer=True
    )


@case("degenerate", "unrelated-with-outputs")
def _(ws, tmp):
    src = tmp / "noise.npy"
    np.save(src, np.random.default_rng(10).uniform(-1.5, 1.5, (20000, 3)))
    out, png = tmp / "T.txt", tmp / "a.png"
    return register_inv(
        ws,
        "demo",
        src,
        ws.demo.ref_path,
        "--out",
        s(out),
        "--render",
        s(png),
        allowed=frozenset({2, 3}),
        no_answer=True,
        outputs=(out, png),
    )


# =============================================================================================
# 4. arguments
# =============================================================================================


def _arg_case(
    cid: str,
    extra: tuple[str, ...],
    allowed,
    *,
    names=(),
    pair="demo",
    fast=False,
    argparse=False,
    **kw,
):
    @case("args", cid, fast=fast)
    def build(ws, tmp):
        p = ws.pair(pair)
        ex = tuple(e(ws, tmp) if callable(e) else e for e in extra)
        return register_inv(
            ws,
            pair,
            p.src_path,
            p.ref_path,
            *ex,
            allowed=allowed,
            names=names,
            argparse=argparse,
            **kw,
        )


VOXEL = ("voxel_size", "voxel-size", "voxel")


def _dashy(value: str) -> bool:
    """argparse reads a value like ``-inf`` or ``-1G`` as an option (only plain negative
    numbers pass): its own usage error, exit 2."""
    return value.startswith("-") and not re.fullmatch(r"-\d+|-\d*\.\d+", value)


# not a positive finite length: the parser refuses it, naming the option (the API's own
# check named it voxel_size, a name the command line does not have)
for _v in ("0", "-1", "nan", "inf", "-inf"):
    for _tag, _m in (("fpfh", ("--method", "fpfh-ransac")), ("geo-icp", ("--icp",))):
        _arg_case(
            f"voxel-{_v}-{_tag}",
            (*_m, "--voxel-size", _v),
            BAD,
            names=("--voxel-size",),
            fast=(_v, _tag) == ("0", "fpfh"),
            argparse=True,
        )
    _arg_case(f"voxel-{_v}-geo", ("--voxel-size", _v), BAD, names=("--voxel-size",),
              argparse=True)  # fmt: skip
for _v in ("1e-9", "1e9", "1e-300", "0.5"):
    for _tag, _m in (("fpfh", ("--method", "fpfh-ransac")), ("geo-icp", ("--icp",))):
        _arg_case(f"voxel-{_v}-{_tag}", (*_m, "--voxel-size", _v), ANY, names=VOXEL)
_arg_case("voxel-abc", ("--voxel-size", "abc"), BAD, names=VOXEL, argparse=True)
_arg_case(
    "voxel-1e9-kitti-fpfh",
    ("--method", "fpfh-ransac", "--voxel-size", "1e9"),
    ANY,
    names=VOXEL,
    pair="kitti",
)

DEVICE = ("device", "cuda", "foo", "meta")
for _d in ("cuda", "foo", "cuda:99", "", "CUDA", "meta", "cuda:-1", "cpu:banana"):
    _arg_case(f"device-{_d or 'empty'}", ("--device", _d), BAD, names=DEVICE, fast=_d == "cuda")
_arg_case("device-cpu0", ("--device", "cpu:0"), OK)
_arg_case(
    "device-cuda-fpfh",
    ("--method", "fpfh-ransac", "--icp", "--device", "cuda"),
    frozenset({0, 2}),
    names=DEVICE,
)
_arg_case("device-cuda-kitti", ("--device", "cuda"), BAD, names=DEVICE, pair="kitti")

MODEL = ("model", ".pt")


def _model_file(name: str, make: Callable[[Workspace, Path], Path]):
    return lambda ws, tmp: s(make(ws, tmp))


def _write(tmp: Path, name: str, data: bytes) -> Path:
    (tmp / name).write_bytes(data)
    return tmp / name


class _Evil:
    """Unpickling this creates a file: a checkpoint that runs code when loaded unsafely."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _evil_pt(ws, tmp) -> Path:
    import torch

    path = tmp / "evil.pt"
    torch.save({"format": "pcreg", "model": _Evil(s(tmp / "PWNED"))}, path)
    return path


def _model_case(cid: str, make, allowed=BAD, names=MODEL, fast=False, pair="demo", **kw):
    @case("args", f"model-{cid}", fast=fast)
    def build(ws, tmp):
        p = ws.pair(pair)
        model = make(ws, tmp)
        nm = names + ((Path(model).name,) if os.sep in s(model) else ())
        if 0 in allowed:  # a usable model may refuse the pair itself (too small, too large)
            nm += _names(p.src_path, p.ref_path)
        return register_inv(
            ws, pair, p.src_path, p.ref_path, "--model", s(model), allowed=allowed, names=nm, **kw
        )


_model_case("nonexistent", lambda ws, tmp: tmp / "nope.pt", fast=True)
_model_case("nonexistent-name", lambda ws, tmp: "indoorr")
_model_case("empty-name", lambda ws, tmp: "", names=("model",))
_model_case("capitalised-name", lambda ws, tmp: "Indoor", allowed=ANY)
_model_case(
    "no-config",
    lambda ws, tmp: ws.checkpoint_variant(
        "noconfig.pt", lambda p: {k: v for k, v in p.items() if k != "config"}
    ),
    fast=True,
)
_model_case(
    "plain-state-dict", lambda ws, tmp: ws.checkpoint_variant("statedict.pt", lambda p: p["model"])
)
_model_case(
    "config-bad-voxel",
    lambda ws, tmp: ws.checkpoint_variant(
        "badvoxel.pt", lambda p: {**p, "config": {**p["config"], "voxel_size": -1.0}}
    ),
)
_model_case(
    "config-nan-voxel",
    lambda ws, tmp: ws.checkpoint_variant(
        "nanvoxel.pt", lambda p: {**p, "config": {**p["config"], "voxel_size": float("nan")}}
    ),
)
_model_case(
    "config-missing-key",
    lambda ws, tmp: ws.checkpoint_variant(
        "missingkey.pt",
        lambda p: {**p, "config": {k: v for k, v in p["config"].items() if k != "hidden_dim"}},
    ),
    allowed=ANY,
)
_model_case(
    "config-unknown-key",
    lambda ws, tmp: ws.checkpoint_variant(
        "unknownkey.pt", lambda p: {**p, "config": {**p["config"], "frobnicate": 3}}
    ),
    allowed=ANY,
)
_model_case(
    "wrong-shapes", lambda ws, tmp: ws.checkpoint_variant("shapes.pt", _shrink_first_weight)
)
_model_case(
    "wrong-kind", lambda ws, tmp: ws.checkpoint_variant("kind.pt", lambda p: {**p, "kind": "vit"})
)
_model_case("random-bytes", lambda ws, tmp: _write(tmp, "random.pt", rng_bytes(50_000, 11)))
_model_case("empty-file", lambda ws, tmp: _write(tmp, "empty.pt", b""))
_model_case("text-file", lambda ws, tmp: _write(tmp, "notes.pt", b"hello, model\n"))
_model_case("directory", lambda ws, tmp: (tmp / "weights.pt").mkdir() or tmp / "weights.pt")
_model_case(
    "truncated-shipped",
    lambda ws, tmp: _write(
        tmp, "indoor_cut.pt", _shipped("indoor.pt")[: len(_shipped("indoor.pt")) // 2]
    ),
)
_model_case("tiny-random-weights", lambda ws, tmp: ws.tiny_checkpoint, allowed=frozenset({0, 3}))
_model_case(
    "tiny-random-weights-kitti",
    lambda ws, tmp: ws.tiny_checkpoint,
    allowed=frozenset({0, 2, 3}),
    pair="kitti",
)
_model_case("outdoor-on-room", lambda ws, tmp: "outdoor", allowed=ANY)
_model_case("indoor-on-kitti", lambda ws, tmp: "indoor", allowed=ANY, pair="kitti")


def _shipped(name: str) -> bytes:
    from harness_data import REPO

    return (REPO / "pcreg" / "weights" / name).read_bytes()


def _shrink_first_weight(payload: dict) -> dict:
    state = dict(payload["model"])
    key = next(k for k, v in state.items() if getattr(v, "ndim", 0) >= 2)
    state[key] = state[key][..., :1].clone()
    return {**payload, "model": state}


@case("args", "model-pickle-code-not-run")
def _(ws, tmp):
    path = _evil_pt(ws, tmp)
    p = ws.demo
    return register_inv(
        ws,
        "demo",
        p.src_path,
        p.ref_path,
        "--model",
        s(path),
        allowed=BAD,
        names=("evil.pt",),
        forbid_created=(tmp / "PWNED",),
    )


@case("args", "model-path-with-fpfh")
def _(ws, tmp):
    p = ws.demo
    return register_inv(
        ws,
        "demo",
        p.src_path,
        p.ref_path,
        "--method",
        "fpfh-ransac",
        "--model",
        s(ws.tiny_checkpoint),
        allowed=BAD,
        names=(*MODEL, "fpfh", "tiny"),
    )


for _m in ("bogus", "", "FPFH-RANSAC"):
    _arg_case(
        f"method-{_m or 'empty'}",
        ("--method", _m),
        BAD,
        names=("method",),
        argparse=True,
        fast=_m == "bogus",
    )

ORIENT = ("orientation_keep", "orientation-keep", "orientation")
for _k in ("-1", "2", "nan", "inf", "-inf", "1e300"):
    _arg_case(
        f"orientation-keep-{_k}",
        ("--orientation-keep", _k),
        BAD,
        names=ORIENT,
        fast=_k == "2",
        argparse=_dashy(_k),
    )
_arg_case("orientation-keep-abc", ("--orientation-keep", "abc"), BAD, names=ORIENT, argparse=True)
for _k in ("0", "1", "1e-300", "0.999"):
    _arg_case(f"orientation-keep-{_k}", ("--orientation-keep", _k), frozenset({0, 3}))
_arg_case(
    "orientation-keep-fpfh",
    ("--method", "fpfh-ransac", "--icp", "--orientation-keep", "0.5"),
    frozenset({0, 2}),
    names=ORIENT,
)
_arg_case("orientation-keep-outdoor", ("--orientation-keep", "-3"), BAD, names=ORIENT, pair="kitti")

MEM = ("max_memory", "max-memory", "memory", "GiB")
for _m in ("0", "abc", "1K", "-1G", "1e400", "nanG", "infG", "", "1e-300", "4X", "0.5"):
    _arg_case(
        f"max-memory-{_m or 'empty'}",
        ("--max-memory", _m),
        BAD,
        names=MEM + _names("src.npy", "ref.npy"),
        fast=_m == "1K",
        argparse=_dashy(_m),
    )
for _m in ("100G", "1.5GiB", "4 G", "3000000000", "100T"):
    _arg_case(f"max-memory-{_m.replace(' ', '_')}", ("--max-memory", _m), OK, names=MEM)
_arg_case(
    "max-memory-1K-fpfh",
    ("--method", "fpfh-ransac", "--icp", "--max-memory", "1K"),
    frozenset({0, 2}),
    names=MEM,
)
_arg_case(
    "max-memory-1K-kitti",
    ("--max-memory", "1K"),
    BAD,
    names=(*MEM, "000094", "000095"),
    pair="kitti",
)


def _gt_case(cid, make, allowed=BAD, fast=False, name="gt.txt", **kw):
    @case("args", f"gt-{cid}", fast=fast)
    def build(ws, tmp):
        path = tmp / name
        data = make(ws)
        if data is not None:
            path.write_bytes(data)
        p = ws.demo
        return register_inv(
            ws,
            "demo",
            p.src_path,
            p.ref_path,
            "--gt",
            s(path),
            allowed=allowed,
            names=(name,),
            **kw,
        )


def _mat(m) -> bytes:
    return "\n".join(" ".join(repr(float(v)) for v in row) for row in np.asarray(m)).encode()


_gt_case("non-rigid", lambda ws: _mat(np.diag([2.0, 2.0, 2.0, 1.0])), fast=True)
_gt_case("nan", lambda ws: _mat(np.full((4, 4), np.nan)))
_gt_case("inf-translation", lambda ws: _mat(translation((np.inf, 0, 0))))
_gt_case("missing", lambda ws: None)
_gt_case("3x3", lambda ws: _mat(np.eye(3)))
_gt_case("empty", lambda ws: b"")
_gt_case("garbage-text", lambda ws: b"the transform is identity\n")
_gt_case("binary-garbage", lambda ws: rng_bytes(200, 1))
_gt_case("reflection", lambda ws: _mat(np.diag([1.0, 1.0, -1.0, 1.0])))
_gt_case("bad-bottom-row", lambda ws: _mat(np.vstack([np.eye(4)[:3], [1, 0, 0, 1]])))
_gt_case("csv-extension", lambda ws: _mat(ws.demo.gt), name="gt.csv")
_gt_case("wrong-but-rigid", lambda ws: _mat(translation((5.0, 0, 0))), allowed=OK)
_gt_case(
    "valid-3x4",
    lambda ws: " ".join(repr(float(v)) for v in ws.demo.gt[:3].ravel()).encode(),
    allowed=OK,
)
_gt_case("valid-npy", lambda ws: _npy(ws.demo.gt), allowed=OK, name="gt.npy")
_gt_case(
    "valid-json",
    lambda ws: json.dumps({"transform": ws.demo.gt.tolist()}).encode(),
    allowed=OK,
    name="gt.json",
)
_gt_case(
    "json-nan",
    lambda ws: b'{"transform": [[NaN, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]}',
    name="gt.json",
)
_gt_case("huge-translation", lambda ws: _mat(translation((1e300, 0, 0))), allowed=frozenset({0, 2}))
_gt_case("npy-pickle", lambda ws: _npy(np.array([np.eye(4)], dtype=object)), name="gt.npy")


@case("args", "gt-directory")
def _(ws, tmp):
    (tmp / "gtdir.txt").mkdir()
    p = ws.demo
    return register_inv(
        ws,
        "demo",
        p.src_path,
        p.ref_path,
        "--gt",
        s(tmp / "gtdir.txt"),
        allowed=BAD,
        names=("gtdir.txt",),
    )


def _cli_case(cid: str, argv: list[str], allowed, fast=False, **kw):
    @case("args", cid, fast=fast)
    def build(ws, tmp):
        return Invocation(argv=list(argv), allowed=allowed, kind="other", **kw)


_cli_case("no-command", [], BAD, argparse=True)
_cli_case("unknown-command", ["regster", "a.ply", "b.ply"], BAD, argparse=True, names=("regster",))
_cli_case("register-one-arg", ["register", "a.ply"], BAD, argparse=True, names=("ref",))
_cli_case(
    "register-unknown-flag",
    ["register", "a.ply", "b.ply", "--frobnicate"],
    BAD,
    argparse=True,
    names=("--frobnicate",),
)
_cli_case(
    "register-out-no-value",
    ["register", "a.ply", "b.ply", "--out"],
    BAD,
    argparse=True,
    names=("--out",),
)
_cli_case("register-help", ["register", "--help"], OK)
_cli_case("register-empty-paths", ["register", "", ""], BAD, names=("src", "''", "path", ":"))


# =============================================================================================
# 5. outputs
# =============================================================================================


def _out(
    ws: Workspace,
    tmp: Path,
    *extra: str | bytes,
    names=(),
    outputs=(),
    on_failure=(),
    guarded=(),
    allowed=BAD,
    pair="demo",
    **kw,
) -> Invocation:
    """``register`` of a real pair with output options, run in ``tmp``."""
    p = ws.pair(pair)
    return register_inv(
        ws,
        pair,
        p.src_path,
        p.ref_path,
        *extra,
        allowed=allowed,
        names=names,
        outputs=tuple(outputs),
        guarded_on_failure=tuple(on_failure),
        guarded=tuple(guarded),
        cwd=tmp,
        **kw,
    )


def _file(path: Path, data: bytes = b"keep me\n") -> Path:
    path.write_bytes(data)
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _link(path: Path, target: Path) -> Path:
    path.symlink_to(target)
    return path


@case("outputs", "out-missing-dir", fast=True)
def _(ws, t):
    out = t / "nodir" / "T.txt"
    return _out(ws, t, "--out", s(out), names=("T.txt", "nodir"), outputs=(out,))


@case("outputs", "render-missing-dir")
def _(ws, t):
    png = t / "nodir" / "a.png"
    return _out(ws, t, "--render", s(png), names=("a.png", "nodir"), outputs=(png,))


@case("outputs", "out-readonly-dir", nonroot=True)
def _(ws, t):
    (t / "ro").mkdir(mode=0o555)
    return _out(
        ws, t, "--out", s(t / "ro" / "T.txt"), names=("T.txt", "ro"), outputs=(t / "ro" / "T.txt",)
    )


@case("outputs", "render-readonly-dir", nonroot=True)
def _(ws, t):
    (t / "ro").mkdir(mode=0o555)
    return _out(
        ws,
        t,
        "--render",
        s(t / "ro" / "a.png"),
        names=("a.png", "ro"),
        outputs=(t / "ro" / "a.png",),
    )


@case("outputs", "same-out-render", fast=True)
def _(ws, t):
    x = t / "X.txt"
    return _out(ws, t, "--out", s(x), "--render", s(x), names=("X.txt",), outputs=(x,))


@case("outputs", "same-out-render-relative")
def _(ws, t):
    return _out(
        ws, t, "--out", "X.txt", "--render", "./X.txt", names=("X.txt",), outputs=(t / "X.txt",)
    )


@case("outputs", "same-out-render-dotdot")
def _(ws, t):
    (t / "d").mkdir()
    return _out(
        ws,
        t,
        "--out",
        s(t / "d" / ".." / "X.txt"),
        "--render",
        s(t / "X.txt"),
        names=("X.txt",),
        outputs=(t / "X.txt",),
    )


@case("outputs", "same-out-render-hardlink-force")
def _(ws, t):
    a = _file(t / "A.txt")
    os.link(a, t / "B.png")  # one file, two names
    return _out(
        ws,
        t,
        "--out",
        s(a),
        "--render",
        s(t / "B.png"),
        "--force",
        names=("A.txt", "B.png"),
        on_failure=(a, t / "B.png"),
    )


@case("outputs", "out-exists", fast=True)
def _(ws, t):
    out = _file(t / "T.txt")
    return _out(ws, t, "--out", s(out), names=("T.txt",), on_failure=(out,))


@case("outputs", "render-exists")
def _(ws, t):
    png = _file(t / "a.png")
    return _out(ws, t, "--render", s(png), names=("a.png",), on_failure=(png,))


@case("outputs", "out-exists-force")
def _(ws, t):
    out = _file(t / "T.txt")
    return _out(ws, t, "--out", s(out), "--force", names=("T.txt",), on_failure=(out,), allowed=OK)


@case("outputs", "out-is-an-input")
def _(ws, t):
    src = _file(t / "src_copy.npy", ws.demo.src_path.read_bytes())
    return register_inv(
        ws,
        "demo",
        src,
        ws.demo.ref_path,
        "--out",
        s(src),
        allowed=BAD,
        names=("src_copy.npy",),
        guarded=(src,),
        cwd=t,
    )


@case("outputs", "out-fifo-force", fast=True)
def _(ws, t):
    fifo = _fifo(t / "T.txt")
    return _out(
        ws, t, "--out", s(fifo), "--force", names=("T.txt",), guarded=(fifo,), max_wall_s=120
    )


@case("outputs", "render-fifo-force")
def _(ws, t):
    fifo = _fifo(t / "a.png")
    return _out(
        ws, t, "--render", s(fifo), "--force", names=("a.png",), guarded=(fifo,), max_wall_s=120
    )


@case("outputs", "out-fifo")
def _(ws, t):
    fifo = _fifo(t / "T.txt")
    return _out(ws, t, "--out", s(fifo), names=("T.txt",), guarded=(fifo,), max_wall_s=120)


@case("outputs", "out-symlink-force", fast=True)
def _(ws, t):
    victim = _file(t / "victim.txt")
    link = _link(t / "T.txt", victim)
    return _out(ws, t, "--out", s(link), "--force", names=("T.txt",), guarded=(link, victim))


@case("outputs", "render-symlink-force")
def _(ws, t):
    victim = _file(t / "victim.png")
    link = _link(t / "a.png", victim)
    return _out(ws, t, "--render", s(link), "--force", names=("a.png",), guarded=(link, victim))


@case("outputs", "out-dangling-symlink")
def _(ws, t):
    link = _link(t / "T.txt", t / "nowhere")
    return _out(ws, t, "--out", s(link), names=("T.txt",), guarded=(link, t / "nowhere"))


@case("outputs", "out-symlink-to-dir-force")
def _(ws, t):
    (t / "d").mkdir()
    link = _link(t / "T.txt", t / "d")
    return _out(ws, t, "--out", s(link), "--force", names=("T.txt",), guarded=(link,))


@case("outputs", "out-directory")
def _(ws, t):
    (t / "T.txt").mkdir()
    return _out(ws, t, "--out", s(t / "T.txt"), names=("T.txt",), guarded=(t / "T.txt",))


@case("outputs", "out-directory-force")
def _(ws, t):
    (t / "T.txt").mkdir()
    return _out(ws, t, "--out", s(t / "T.txt"), "--force", names=("T.txt",), guarded=(t / "T.txt",))


@case("outputs", "render-directory")
def _(ws, t):
    (t / "a.png").mkdir()
    return _out(ws, t, "--render", s(t / "a.png"), names=("a.png",), guarded=(t / "a.png",))


@case("outputs", "out-trailing-slash")
def _(ws, t):
    # argparse's Path drops the slash: writing a file "newdir" is allowed, a directory is not
    out = t / "newdir"
    return _out(
        ws,
        t,
        "--out",
        s(t) + "/newdir/",
        names=("newdir",),
        outputs=(out,),
        allowed=frozenset({0, 2}),
    )


@case("outputs", "out-dev-null-force")
def _(ws, t):
    return _out(ws, t, "--out", "/dev/null", "--force", names=("/dev/null",))


@case("outputs", "out-dev-full")
def _(ws, t):
    return _out(ws, t, "--out", "/dev/full", names=("/dev/full",))


@case("outputs", "out-under-a-file")
def _(ws, t):
    f = _file(t / "f.txt")
    return _out(ws, t, "--out", s(f / "T.txt"), names=("T.txt", "f.txt"), guarded=(f,))


@case("outputs", "out-png-suffix")
def _(ws, t):
    return _out(ws, t, "--out", s(t / "T.png"), names=("T.png",), outputs=(t / "T.png",))


@case("outputs", "out-no-suffix")
def _(ws, t):
    return _out(
        ws,
        t,
        "--out",
        s(t / "transform"),
        names=("transform",),
        outputs=(t / "transform",),
        allowed=frozenset({0, 2}),
    )


@case("outputs", "out-name-too-long")
def _(ws, t):
    return _out(ws, t, "--out", s(t / ("T" * 300 + ".txt")), names=("TTTT",))


@case("outputs", "render-name-too-long")
def _(ws, t):
    return _out(ws, t, "--render", s(t / ("a" * 300 + ".png")), names=("aaaa",))


@case("outputs", "out-json")
def _(ws, t):
    return _out(ws, t, "--out", s(t / "T.json"), allowed=OK, expect_outputs=(t / "T.json",))


@case("outputs", "out-npy")
def _(ws, t):
    return _out(ws, t, "--out", s(t / "T.npy"), allowed=OK, expect_outputs=(t / "T.npy",))


@case("outputs", "out-relative-cwd")
def _(ws, t):
    return _out(
        ws,
        t,
        "--out",
        "T.txt",
        "--render",
        "a.png",
        allowed=OK,
        expect_outputs=(t / "T.txt", t / "a.png"),
    )


@case("outputs", "out-render-kitti")
def _(ws, t):
    return _out(
        ws,
        t,
        "--out",
        "T.txt",
        "--render",
        "a.png",
        allowed=OK,
        pair="kitti",
        expect_outputs=(t / "T.txt", t / "a.png"),
    )


@case("outputs", "render-jpg")
def _(ws, t):
    return _out(
        ws,
        t,
        "--render",
        s(t / "a.jpg"),
        names=("a.jpg",),
        outputs=(t / "a.jpg",),
        allowed=frozenset({0, 2}),
    )


@case("outputs", "out-non-utf8-name")
def _(ws, t):
    name = os.fsencode(t) + b"/T_\xff.txt"
    return _out(ws, t, "--out", name, allowed=OK)


def _stdout_case(cid, stdout: str, extra=(), missing=False, fast=False, json_out=True):
    @case("outputs", cid, fast=fast)
    def build(ws, tmp):
        p = ws.demo
        src = tmp / "missing.npy" if missing else p.src_path
        return register_inv(
            ws,
            "demo",
            src,
            p.ref_path,
            *extra,
            allowed=BAD,
            json_out=json_out,
            names=("stdout", "missing.npy", "output"),
            stdout=stdout,
        )


_stdout_case("json-stdout-closed", "closed", fast=True)
_stdout_case("json-stdout-dev-full", "full")
_stdout_case("human-stdout-closed", "closed", json_out=False)
_stdout_case("human-stdout-dev-full", "full", json_out=False)
_stdout_case("fpfh-json-stdout-dev-full", "full", ("--method", "fpfh-ransac"))
_stdout_case("missing-input-stdout-closed", "closed", missing=True)


@case("outputs", "stdout-full-with-out-file")
def _(ws, tmp):
    # stdout fails after --out was written: exit 2 (the --out file may stay: it is complete)
    p = ws.demo
    return register_inv(
        ws,
        "demo",
        p.src_path,
        p.ref_path,
        "--out",
        s(tmp / "T.txt"),
        allowed=BAD,
        names=("stdout",),
        stdout="full",
    )


@case("outputs", "exit3-writes-nothing")
def _(ws, tmp):
    p = ws.demo
    src = tmp / "noise.npy"
    np.save(src, np.random.default_rng(12).normal(0, 0.8, (20000, 3)))
    out, png = tmp / "T.txt", tmp / "a.png"
    return register_inv(
        ws,
        "demo",
        src,
        p.ref_path,
        "--out",
        s(out),
        "--render",
        s(png),
        allowed=frozenset({2, 3}),
        no_answer=True,
        outputs=(out, png),
    )


# =============================================================================================
# 6. view --render and odometry
# =============================================================================================


def _view_case(
    cid,
    make_transform,
    allowed,
    *,
    fast=False,
    src=None,
    ref=None,
    names=None,
    extra=(),
    render=True,
    **kw,
):
    @case("view-odometry", f"view-{cid}", fast=fast)
    def build(ws, tmp):
        p = ws.demo
        s_path = src(ws, tmp) if src else p.src_path
        r_path = ref(ws, tmp) if ref else p.ref_path
        argv = ["view", s(s_path), s(r_path), *extra]
        tname = None
        if make_transform is not None:
            tpath = tmp / "T.txt"
            tpath.write_bytes(make_transform(ws))
            argv += ["--transform", s(tpath)]
            tname = tpath.name
        png = tmp / "view.png"
        if render:
            argv += ["--render", s(png)]
        nm = names if names is not None else ((tname,) if tname else ())
        return Invocation(
            argv=argv,
            allowed=allowed,
            kind="view",
            names=nm,
            outputs=(png,),
            expect_outputs=(png,) if render else (),
            **kw,
        )


_view_case("translation-1e300", lambda ws: _mat(translation((1e300, 0, 0))), frozenset({0, 2}))
_view_case("translation-1e20", lambda ws: _mat(translation((1e20, -1e20, 0))), frozenset({0, 2}))
_view_case("nan-transform", lambda ws: _mat(np.full((4, 4), np.nan)), BAD, fast=True)
_view_case("inf-transform", lambda ws: _mat(translation((0, np.inf, 0))), BAD)
_view_case("non-rigid", lambda ws: _mat(np.diag([3.0, 1.0, 1.0, 1.0])), BAD, fast=True)
_view_case("reflection", lambda ws: _mat(np.diag([-1.0, 1.0, 1.0, 1.0])), BAD)
_view_case("projective-row", lambda ws: _mat(np.vstack([np.eye(4)[:3], [0, 0, 1, 1]])), BAD)
_view_case("empty-transform", lambda ws: b"", BAD)
_view_case(
    "3x4-kitti-line",
    lambda ws: " ".join(repr(float(v)) for v in ws.demo.gt[:3].ravel()).encode(),
    OK,
)
_view_case("gt", lambda ws: _mat(ws.demo.gt), OK)
_view_case("identity", None, OK)


@case("view-odometry", "view-missing-transform")
def _(ws, tmp):
    p = ws.demo
    return Invocation(
        argv=[
            "view",
            s(p.src_path),
            s(p.ref_path),
            "--transform",
            s(tmp / "T.txt"),
            "--render",
            s(tmp / "v.png"),
        ],
        allowed=BAD,
        kind="view",
        names=("T.txt",),
        outputs=(tmp / "v.png",),
    )


def _mm_src(ws, tmp):
    np.save(tmp / "src_mm.npy", ws.demo.src * 1000.0)
    return tmp / "src_mm.npy"


_view_case("mm-vs-m", None, OK, src=_mm_src)
_view_case(
    "spread-1e9",
    None,
    frozenset({0, 2}),
    src=lambda ws, t: _save(t / "spread.npy", _spread(6)(ws)),
    ref=lambda ws, t: _save(t / "spread2.npy", _spread(7)(ws)),
    max_wall_s=120,
)
_view_case(
    "one-point",
    None,
    frozenset({0, 2}),
    src=lambda ws, t: _save(t / "one.npy", ws.demo.src[:1]),
    names=("one.npy",),
)
_view_case(
    "identical-points",
    None,
    frozenset({0, 2}),
    src=lambda ws, t: _save(t / "same.npy", np.tile([[1.0, 2.0, 3.0]], (500, 1))),
    names=("same.npy",),
)
_view_case(
    "empty-src", None, BAD, src=lambda ws, t: _write(t, "empty.xyz", b""), names=("empty.xyz",)
)
_view_case(
    "nan-src",
    None,
    BAD,
    src=lambda ws, t: _write(t, "nan.xyz", b"nan 0 0\n" + cloud_bytes(ws.demo.src, "xyz")),
    names=("nan.xyz",),
    extra=("--strict-input",),
)
_view_case(
    "nan-src-drop",
    None,
    OK,
    src=lambda ws, t: _write(t, "nan.xyz", b"nan 0 0\n" + cloud_bytes(ws.demo.src, "xyz")),
)
_view_case(
    "corrupt-src",
    None,
    BAD,
    src=lambda ws, t: _write(t, "cut.ply", _base(ws, "ply-binary").read_bytes()[:5000]),
    names=("cut.ply",),
)
_view_case("no-render-no-display", None, BAD, render=False, names=("display", "--render"))


@case("view-odometry", "view-georef-utm")
def _(ws, tmp):
    src, ref, a = _georef_files(ws, "demo", "utm", "npy")
    tpath = tmp / "T.txt"
    tpath.write_bytes(_mat(a @ ws.demo.gt @ np.linalg.inv(a)))
    png = tmp / "v.png"
    return Invocation(
        argv=["view", s(src), s(ref), "--transform", s(tpath), "--render", s(png)],
        allowed=OK,
        kind="view",
        outputs=(png,),
        expect_outputs=(png,),
    )


def _view_render_target(cid, setup):
    @case("view-odometry", f"view-render-{cid}")
    def build(ws, tmp):
        p = ws.demo
        target, extra, guarded = setup(tmp)
        return Invocation(
            argv=["view", s(p.src_path), s(p.ref_path), "--render", s(target), *extra],
            allowed=BAD,
            kind="view",
            names=(target.name,),
            guarded=guarded,
            max_wall_s=120,
        )


_view_render_target("exists", lambda t: (_file(t / "v.png"), (), (t / "v.png",)))
_view_render_target("fifo-force", lambda t: (_fifo(t / "v.png"), ("--force",), (t / "v.png",)))
_view_render_target(
    "symlink-force",
    lambda t: (_link(t / "v.png", _file(t / "victim")), ("--force",), (t / "v.png", t / "victim")),
)
_view_render_target("missing-dir", lambda t: (t / "no" / "v.png", (), ()))


def _save(path: Path, arr) -> Path:
    np.save(path, arr)
    return path


# ---- odometry --------------------------------------------------------------------------------


def _odo_case(
    cid,
    scans: Callable[[Workspace, Path], list],
    allowed,
    *,
    extra=("--workers", "1"),
    fast=False,
    relative=None,
    names=(),
    **kw,
):
    @case("view-odometry", f"odometry-{cid}", fast=fast)
    def build(ws, tmp):
        paths = scans(ws, tmp)
        rel = relative(ws) if relative else {}
        ex = tuple(e(tmp) if callable(e) else e for e in extra)
        return Invocation(
            argv=["odometry", *map(s, paths), "--json", *ex],
            allowed=allowed,
            kind="odometry",
            relative_gt=rel,
            names=names,
            rte_max=0.5,
            cwd=tmp,
            **kw,
        )


def _k(ws, tmp=None):
    return [ws.kitti.src_path, ws.kitti.ref_path]


def _k_rel(ws):
    return {0: np.linalg.inv(ws.kitti.gt)}  # relative[0] maps scan 1 into scan 0


_odo_case("kitti-pair", _k, OK, relative=_k_rel)
_odo_case(
    "kitti-pair-fpfh-icp",
    _k,
    OK,
    relative=_k_rel,
    extra=("--workers", "1", "--method", "fpfh-ransac", "--icp"),
)
_odo_case("kitti-pair-ray", _k, OK, relative=_k_rel, extra=())
_odo_case(
    "missing-scan",
    lambda ws, t: [ws.kitti.src_path, t / "000096.bin", ws.kitti.ref_path],
    BAD,
    names=("000096.bin",),
    fast=True,
)
_odo_case("one-scan", lambda ws, t: [ws.kitti.src_path], BAD, names=("scan",), fast=True)
_odo_case(
    "corrupt-scan-among-good",
    lambda ws, t: [
        ws.kitti.src_path,
        _write(t, "000095.bin", ws.kitti.ref_path.read_bytes()[:1000003]),
        ws.kitti.ref_path,
    ],
    BAD,
    names=("000095.bin",),
)
_odo_case(
    "corrupt-scan-among-good-ray",
    lambda ws, t: [
        ws.kitti.src_path,
        _write(t, "000095.bin", ws.kitti.ref_path.read_bytes()[:1000003]),
        ws.kitti.ref_path,
    ],
    BAD,
    names=("000095.bin",),
    extra=(),
    max_wall_s=60,
)
_odo_case(
    "nan-scan",
    lambda ws, t: [ws.kitti.src_path, _write(t, "nan.bin", _nan_bin(ws))],
    BAD,
    names=("nan.bin",),
    extra=("--workers", "1", "--strict-input"),
)
_odo_case(
    "nan-scan-drop",
    lambda ws, t: [ws.kitti.src_path, _write(t, "nan.bin", _nan_bin(ws))],
    OK,
    relative=_k_rel,
    extra=("--workers", "1"),
)
_odo_case(
    "same-out-render",
    _k,
    BAD,
    names=("poses.txt",),
    extra=("--workers", "1", "--out", "poses.txt", "--render", "poses.txt"),
    fast=True,
)
_odo_case(
    "out-exists",
    _k,
    BAD,
    names=("poses.txt",),
    extra=("--workers", "1", "--out", lambda t: s(_file(t / "poses.txt"))),
)
_odo_case(
    "out-missing-dir",
    _k,
    BAD,
    names=("poses.txt", "nodir"),
    extra=("--workers", "1", "--out", "nodir/poses.txt"),
)
_odo_case(
    "render-fifo-force",
    _k,
    BAD,
    names=("map.png",),
    max_wall_s=120,
    extra=("--workers", "1", "--render", lambda t: s(_fifo(t / "map.png")), "--force"),
)
_odo_case("empty-dir", lambda ws, t: [(t / "seq").mkdir() or t / "seq"], BAD, names=("seq",))
_odo_case(
    "dir-without-scans",
    lambda ws, t: [(t / "seq").mkdir() or (_file(t / "seq" / "README.md") and t / "seq")],
    BAD,
    names=("seq",),
)
_odo_case("glob-no-match", lambda ws, t: [t / "*.bin"], BAD, names=("*.bin",))
_odo_case(
    "duplicate-scan",
    lambda ws, t: [ws.kitti.src_path, ws.kitti.src_path],
    frozenset({0, 2, 3}),
    relative=lambda ws: {0: np.eye(4)},
)
_odo_case("workers-0", _k, BAD, names=("workers",), extra=("--workers", "0"))
_odo_case("workers-negative", _k, BAD, names=("workers",), extra=("--workers", "-1"))
_odo_case(
    "device-cuda", _k, BAD, names=("device", "cuda"), extra=("--workers", "1", "--device", "cuda")
)
_odo_case(
    "max-memory-1K",
    _k,
    BAD,
    names=("memory", "000094", "000095"),
    extra=("--workers", "1", "--max-memory", "1K"),
)
_odo_case(
    "bogus-address", _k, BAD, names=("address", "127.0.0.1"), extra=("--address", "127.0.0.1:1")
)
_odo_case(
    "mixed-units",
    lambda ws, t: [ws.kitti.src_path, _save(t / "mm.npy", ws.kitti.ref * 1e3)],
    BAD,
    names=("mm.npy", "000094"),
    words=("scales differ",),
)
_odo_case("scan-dir", lambda ws, t: [_kitti_dir(ws, t)], OK, relative=_k_rel)


@case("view-odometry", "odometry-demo-fragments-indoor")
def _(ws, tmp):
    p = ws.demo
    return Invocation(
        argv=[
            "odometry",
            s(p.src_path),
            s(p.ref_path),
            "--json",
            "--workers",
            "1",
            "--model",
            "indoor",
        ],
        allowed=frozenset({0, 3}),
        kind="odometry",
        relative_gt={0: np.linalg.inv(p.gt)},
        rte_max=0.3,
    )


@case("view-odometry", "odometry-kitti-georef-utm")
def _(ws, tmp):
    src, ref, a = _georef_files(ws, "kitti", "utm", "npy")
    return Invocation(
        argv=["odometry", s(src), s(ref), "--json", "--workers", "1"],
        allowed=frozenset({0, 2}),
        kind="odometry",
        relative_gt={0: np.linalg.inv(ws.kitti.gt)},
        a_src=a,
        a_ref=a,
        rte_max=0.5,
    )


def _nan_bin(ws) -> bytes:
    raw = np.fromfile(ws.kitti.ref_path, dtype=np.float32).reshape(-1, 4).copy()
    raw[50:60, 0] = np.nan
    return raw.tobytes()


def _kitti_dir(ws, tmp) -> Path:
    d = tmp / "velodyne"
    d.mkdir()
    for p in _k(ws):
        (d / p.name).symlink_to(p)
    return d


# =============================================================================================
# 7. the other subcommands' own bad input
# =============================================================================================


def _sub_case(cid, argv: Callable[[Workspace, Path], list], allowed=BAD, *, fast=False, **kw):
    @case("subcommands", cid, fast=fast)
    def build(ws, tmp):
        kw.setdefault("kind", "other")
        return Invocation(
            argv=[s(a) if isinstance(a, Path) else a for a in argv(ws, tmp)],
            allowed=allowed,
            cwd=tmp,
            **kw,
        )


def _batch(manifest_name: str, data: bytes | None, *extra):
    def argv(ws, tmp):
        path = tmp / manifest_name
        if data is not None:
            path.write_bytes(data)
        return ["batch", path, "--out", tmp / "results", *extra]

    return argv


_sub_case("batch-empty-jsonl", _batch("pairs.jsonl", b""), names=("pairs.jsonl",), fast=True)
_sub_case("batch-empty-csv", _batch("pairs.csv", b""), names=("pairs.csv",))
_sub_case("batch-header-only-csv", _batch("pairs.csv", b"src,ref,id\n"), names=("pairs.csv",))
_sub_case(
    "batch-garbage-jsonl",
    _batch("pairs.jsonl", rng_bytes(4000, 2)),
    names=("pairs.jsonl",),
    fast=True,
)
_sub_case("batch-missing-manifest", _batch("nope.jsonl", None), names=("nope.jsonl",))
_sub_case(
    "batch-manifest-is-dir",
    lambda ws, t: ["batch", (t / "m.jsonl").mkdir() or t / "m.jsonl", "--out", t / "r"],
    names=("m.jsonl",),
)
_sub_case("batch-txt-manifest", _batch("pairs.txt", b"a.ply b.ply\n"), names=("pairs.txt",))
_sub_case(
    "batch-csv-missing-columns",
    _batch("pairs.csv", b"source,target\na.ply,b.ply\n"),
    names=("pairs.csv",),
)
_sub_case(
    "batch-jsonl-invalid-line",
    _batch("pairs.jsonl", b'{"src": "a.ply", "ref": "b.ply"}\n{"src": "a.ply", "ref": \n'),
    names=("pairs.jsonl",),
)
_sub_case("batch-jsonl-array-row", _batch("pairs.jsonl", b"[1, 2]\n"), names=("pairs.jsonl",))
_sub_case(
    "batch-jsonl-number-paths",
    _batch("pairs.jsonl", b'{"src": 1, "ref": 2}\n'),
    names=("pairs.jsonl",),
)
_sub_case(
    "batch-gt-15-numbers",
    _batch(
        "pairs.jsonl",
        json.dumps({"src": "a.npy", "ref": "b.npy", "gt": list(range(15))}).encode() + b"\n",
    ),
    names=("pairs.jsonl",),
)
_sub_case(
    "batch-gt-nan",
    _batch(
        "pairs.jsonl",
        b'{"src": "a.npy", "ref": "b.npy", "gt": '
        b"[NaN, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]}\n",
    ),
    names=("pairs.jsonl",),
)
_sub_case(
    "batch-gt-non-rigid",
    _batch(
        "pairs.jsonl",
        json.dumps(
            {"src": "a.npy", "ref": "b.npy", "gt": np.diag([2.0, 2, 2, 1]).ravel().tolist()}
        ).encode(),
    ),
    names=("pairs.jsonl",),
)
_sub_case(
    "batch-duplicate-ids",
    _batch(
        "pairs.jsonl", b'{"src": "a", "ref": "b", "id": "x"}\n{"src": "c", "ref": "d", "id": "x"}\n'
    ),
    names=("pairs.jsonl",),
)
_sub_case(
    "batch-non-utf8", _batch("pairs.csv", b"src,ref\n\xff\xfe.ply,b.ply\n"), names=("pairs.csv",)
)
_sub_case(
    "batch-out-is-file",
    lambda ws, t: [
        "batch",
        _write(
            t,
            "p.jsonl",
            json.dumps({"src": s(ws.kitti.src_path), "ref": s(ws.kitti.ref_path)}).encode(),
        ),
        "--out",
        _file(t / "results"),
    ],
    names=("results",),
    guarded=(),
)
_sub_case(
    "batch-workers-0",
    lambda ws, t: [
        "batch",
        _write(
            t,
            "p.jsonl",
            json.dumps({"src": s(ws.kitti.src_path), "ref": s(ws.kitti.ref_path)}).encode(),
        ),
        "--out",
        t / "r",
        "--workers",
        "0",
    ],
    names=("workers",),
)
_sub_case(
    "batch-device-cuda",
    lambda ws, t: [
        "batch",
        _write(t, "p.jsonl", b'{"src": "a", "ref": "b"}\n'),
        "--out",
        t / "r",
        "--device",
        "cuda",
    ],
    names=("device",),
)
_sub_case(
    "batch-voxel-nan",
    lambda ws, t: [
        "batch",
        _write(t, "p.jsonl", b'{"src": "a", "ref": "b"}\n'),
        "--out",
        t / "r",
        "--voxel-size",
        "nan",
    ],
    names=("--voxel-size",),
    argparse=True,  # not a positive finite length: the parser's refusal
)
_sub_case(
    "batch-max-memory-abc",
    lambda ws, t: [
        "batch",
        _write(t, "p.jsonl", b'{"src": "a", "ref": "b"}\n'),
        "--out",
        t / "r",
        "--max-memory",
        "abc",
    ],
    names=MEM,
)


@case("subcommands", "batch-one-kitti-pair")
def _(ws, tmp):
    man = _write(
        tmp,
        "p.jsonl",
        json.dumps(
            {
                "src": s(ws.kitti.src_path),
                "id": "k94",
                "ref": s(ws.kitti.ref_path),
                "gt": ws.kitti.gt.ravel().tolist(),
            }
        ).encode(),
    )
    return Invocation(
        argv=["batch", s(man), "--out", s(tmp / "res"), "--workers", "1"],
        allowed=OK,
        kind="batch",
        gt=ws.kitti.gt,
        rte_max=0.5,
        batch_dir=tmp / "res",
        cwd=tmp,
    )


@case("subcommands", "batch-missing-scan-in-manifest")
def _(ws, tmp):
    man = _write(
        tmp,
        "p.jsonl",
        json.dumps({"src": s(tmp / "gone.bin"), "ref": s(ws.kitti.ref_path)}).encode(),
    )
    return Invocation(
        argv=["batch", s(man), "--out", s(tmp / "res"), "--workers", "1"],
        allowed=frozenset({4}),  # the pair failed: recorded, and the run exits 4
        kind="batch",
        names=("gone.bin",),
        cwd=tmp,
    )


def _manifest(root_fn, *extra):
    return lambda ws, t: ["manifest", root_fn(ws, t), "--out", t / "pairs.jsonl", *extra]


_sub_case("manifest-missing-dir", _manifest(lambda ws, t: t / "nope"), names=("nope",), fast=True)
_sub_case(
    "manifest-empty-dir",
    _manifest(lambda ws, t: (t / "e").mkdir() or t / "e"),
    names=("e", "metadata"),
)
_sub_case(
    "manifest-root-is-file", _manifest(lambda ws, t: _file(t / "root.txt")), names=("root.txt",)
)
_sub_case(
    "manifest-kitti-layout-on-demo",
    _manifest(lambda ws, t: ws.demo.src_path.parent, "--layout", "kitti"),
    names=("demo", "sequences", "poses"),
)
_sub_case(
    "manifest-bogus-benchmark",
    _manifest(lambda ws, t: (t / "e").mkdir() or t / "e", "--benchmark", "Bogus"),
    names=("Bogus", "e", "metadata"),
)
_sub_case(
    "manifest-bogus-layout",
    _manifest(lambda ws, t: t, "--layout", "bogus"),
    argparse=True,
    names=("layout",),
)
_sub_case(
    "evaluate-missing-checkpoint",
    lambda ws, t: [
        "evaluate",
        f"checkpoint={t}/nope.pt",
        f"dataset.root={ws.demo.src_path.parent}",
    ],
    names=("nope.pt", "metadata", "demo"),
)
_sub_case("evaluate-unknown-key", lambda ws, t: ["evaluate", "frobnicate=3"], names=("frobnicate",))
_sub_case("evaluate-bad-override", lambda ws, t: ["evaluate", "limit=abc"], names=("limit",))
_sub_case("evaluate-no-args", lambda ws, t: ["evaluate"], names=("checkpoint", "root"))
_sub_case("evaluate-not-key-value", lambda ws, t: ["evaluate", "hello"], names=("hello",))
_sub_case(
    "evaluate-log-missing-dirs",
    lambda ws, t: ["evaluate-log", "--gt-dir", t / "gt", "--est-dir", t / "est"],
    names=("gt", "est"),
    fast=True,
)
_sub_case(
    "evaluate-log-empty-dirs",
    lambda ws, t: [
        "evaluate-log",
        "--gt-dir",
        (t / "gt").mkdir() or t / "gt",
        "--est-dir",
        (t / "est").mkdir() or t / "est",
    ],
    names=("gt", "est"),
)
_sub_case(
    "evaluate-log-garbage-log",
    lambda ws, t: [
        "evaluate-log",
        "--gt-dir",
        _scene(t / "gt", rng_bytes(300, 4)),
        "--est-dir",
        _scene(t / "est", b"0 1 2\nnot numbers\n"),
    ],
    names=("gt", "est", ".log", ".info"),
)
_sub_case(
    "benchmark-bogus-flag",
    lambda ws, t: ["benchmark", "--bogus"],
    argparse=True,
    names=("--bogus",),
)
_sub_case(
    "train-bogus-experiment",
    lambda ws, t: ["train", "experiment=bogus"],
    names=("experiment", "bogus"),
)
_sub_case(
    "train-unknown-key",
    lambda ws, t: ["train", "experiment=indoor", "frobnicate.x=1"],
    names=("frobnicate",),
)
_sub_case(
    "vit-bogus-experiment",
    lambda ws, t: ["vit", "train", "experiment=bogus"],
    names=("experiment", "bogus"),
)
_sub_case(
    "detr-bogus-key", lambda ws, t: ["detr", "evaluate", "frobnicate=1"], names=("frobnicate",)
)
_sub_case(
    "demo-out-is-file", lambda ws, t: ["demo", "--out", _file(t / "demo_out")], names=("demo_out",)
)
_sub_case(
    "demo-bogus-pair", lambda ws, t: ["demo", "--pair", "bogus"], argparse=True, names=("--pair",)
)
_sub_case(
    "demo-missing-shared-data",
    lambda ws, t: ["demo", "--pair", "real", "--shared-data", t / "nope", "--out", t / "o"],
    names=("nope",),
)


@case("subcommands", "manifest-out-exists")
def _(ws, tmp):
    out = _file(tmp / "m.jsonl")
    return Invocation(
        argv=["manifest", s(tmp), "--out", s(out)],
        allowed=BAD,
        kind="other",
        names=("m.jsonl", tmp.name, "metadata"),
        guarded=(out,),
        cwd=tmp,
    )


@case("subcommands", "evaluate-log-nan-threshold")
def _(ws, tmp):
    return Invocation(
        argv=["evaluate-log", "--gt-dir", s(tmp), "--est-dir", s(tmp), "--rmse-threshold", "nan"],
        allowed=BAD,
        kind="other",
        names=("threshold", "rmse", tmp.name),
        cwd=tmp,
    )


def _scene(root: Path, data: bytes) -> Path:
    (root / "scene").mkdir(parents=True)
    for name in ("gt.log", "gt.info", "est.log"):
        (root / "scene" / name).write_bytes(data)
    return root
