"""Helpers of the metamorphic suite: the real pairs, the input changes, how each result maps
back into the original frame, the equivalence check, and running the command line.

The rule every test applies ("never silently wrong"): a change of input that leaves the
problem the same must give the same answer as the unchanged input, to
:data:`TRANSLATION_TOL_M` and :data:`ROTATION_TOL_DEG` once the result is mapped back into the
original frame, or be refused (an ``InputError`` in Python, exit 2 on the command line, with a
one-line message). A registered result that differs is the failure this suite exists for; a
result that is merely "not registered" where the unchanged input registered fails too (it is
not a refusal), with its own message so the two are told apart.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("PCREG_SHARED_DATA", REPO.parent / "shared" / "data"))

#: equivalence of two estimates, in the original frame
TRANSLATION_TOL_M = 0.01
ROTATION_TOL_DEG = 0.1

#: seconds one command-line registration may take before the test calls it hung
CLI_TIMEOUT_S = 600


# --------------------------------------------------------------------------- transforms
def translation(d: np.ndarray) -> np.ndarray:
    """``Tr(d)``: the 4x4 translation by ``d (3,)``."""
    out = np.eye(4)
    out[:3, 3] = d
    return out


def transform_gap(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """``(rotation angle in degrees, translation distance in metres)`` between two 4x4
    transforms: the angle of ``R_a^T R_b`` and ``|t_a - t_b|``.

    The angle is ``2 asin(|R_a - R_b|_F / sqrt(8))`` (the same angle for exact rotations),
    not ``acos((tr - 1) / 2)``: that one reads a float32 rotation compared with itself as
    ~0.05 deg apart (its trace is off 3 by ~1e-7), half the tolerance."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    chord = float(np.linalg.norm(a[:3, :3] - b[:3, :3])) / math.sqrt(8.0)
    return math.degrees(2.0 * math.asin(min(chord, 1.0))), float(
        np.linalg.norm(a[:3, 3] - b[:3, 3])
    )


def assert_equivalent(estimate: np.ndarray, reference: np.ndarray, what: str) -> None:
    """``estimate`` (already mapped back into the original frame) equals ``reference`` to
    1 cm and 0.1 deg; else an AssertionError that names ``what`` and both gaps."""
    deg, metres = transform_gap(estimate, reference)
    assert deg <= ROTATION_TOL_DEG and metres <= TRANSLATION_TOL_M, (
        f"{what}: registered, but a different answer from the unchanged input: "
        f"{deg:.4f} deg (tolerance {ROTATION_TOL_DEG}), {100 * metres:.3f} cm "
        f"(tolerance {100 * TRANSLATION_TOL_M:g})\nestimate (mapped back):\n"
        f"{np.array2string(np.asarray(estimate), precision=6)}\nunchanged input's estimate:\n"
        f"{np.array2string(np.asarray(reference), precision=6)}"
    )


# --------------------------------------------------------------------------- outcomes
@dataclass(frozen=True)
class Outcome:
    """What one registration attempt gave.

    status: ``"registered"``, ``"not registered"`` (a result with ``registered`` False, exit
    3), ``"refused"`` (InputError, exit 2) or ``"crashed"`` (any other exception or exit
    status, or a traceback on the command line)."""

    status: str
    transform: np.ndarray | None = None
    message: str = ""
    model: str = ""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def describe(self) -> str:
        text = self.status + (f" by model {self.model}" if self.model else "")
        return text + (f" ({self.message})" if self.message else "")


def api_outcome(src: np.ndarray, ref: np.ndarray) -> Outcome:
    """``pcreg.register(src, ref)`` (model chosen from the extent, as a user gets it)."""
    import time

    import pcreg
    from pcreg.errors import InputError

    start = time.perf_counter()
    try:
        result = pcreg.register(src, ref)
    except InputError as err:
        return Outcome("refused", message=str(err), seconds=time.perf_counter() - start)
    seconds = time.perf_counter() - start
    status = "registered" if result.registered else "not registered"
    return Outcome(
        status,
        np.asarray(result.transform, np.float64),
        result.reason,
        result.model,
        seconds,
        {"hypothesis": result.hypothesis, "confidence": result.confidence},
    )


def cli_outcome(src: Path, ref: Path) -> Outcome:
    """``python -m pcreg register SRC REF --json`` in a subprocess."""
    import time

    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pcreg", "register", str(src), str(ref), "--json"],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        cwd=REPO,
    )
    seconds = time.perf_counter() - start
    err = proc.stderr.strip()
    extra = {"returncode": proc.returncode, "stderr": err, "stdout": proc.stdout}
    if "Traceback" in err or proc.returncode not in (0, 2, 3):
        return Outcome("crashed", message=f"exit {proc.returncode}: {err[-2000:]}", extra=extra)
    if proc.returncode == 2:
        return Outcome("refused", message=err, seconds=seconds, extra=extra)
    lines = proc.stdout.strip().splitlines()
    record = json.loads(lines[-1]) if lines else {}
    if proc.returncode == 0 and not record.get("registered"):
        return Outcome("crashed", message=f"exit 0 but the record says {record}", extra=extra)
    status = "registered" if proc.returncode == 0 else "not registered"
    return Outcome(
        status,
        np.asarray(record["transform"], np.float64),
        record.get("reason", ""),
        record.get("model", ""),
        seconds,
        extra,
    )


def assert_clear_refusal(outcome: Outcome, what: str, names: tuple[str, ...] = ()) -> None:
    """A refusal the user can act on: one non-empty line, no traceback; on the command line
    it is ``pcreg: error: <source>: <problem>``. ``names``: one of them must appear (the
    file or argument that is wrong)."""
    message = outcome.message
    lines = message.splitlines()
    assert outcome.status == "refused", f"{what}: expected a refusal, got {outcome.describe()}"
    assert len(lines) == 1 and lines[0].strip(), f"{what}: refusal is not one line: {message!r}"
    assert "Traceback" not in message and len(message) < 600, f"{what}: {message!r}"
    if "returncode" in outcome.extra:
        assert message.startswith("pcreg: error: "), f"{what}: {message!r}"
    if names:
        assert any(n in message for n in names), f"{what}: message names none of {names}: {message}"


def check_invariant(
    outcome: Outcome,
    reference: Outcome,
    map_back: Callable[[np.ndarray], np.ndarray],
    *,
    refusal_ok: bool,
    what: str,
    names: tuple[str, ...] = (),
) -> None:
    """The metamorphic rule: ``outcome`` is either a clear refusal (when ``refusal_ok``) or a
    registered estimate that, mapped back by ``map_back``, is equivalent to ``reference``
    (the unchanged input's registered estimate). ``names``: as for
    :func:`assert_clear_refusal`."""
    assert reference.status == "registered", f"the unchanged input: {reference.describe()}"
    assert outcome.status != "crashed", f"{what}: crashed: {outcome.message}"
    if outcome.status == "refused":
        assert refusal_ok, f"{what}: refused an input that is as valid as the original: " + (
            outcome.message
        )
        assert_clear_refusal(outcome, what, names)
        return
    assert outcome.status == "registered", (
        f"{what}: {outcome.describe()}, where the unchanged input registered (neither the "
        "same answer nor a refusal)"
    )
    assert outcome.transform is not None
    assert_equivalent(map_back(outcome.transform), reference.transform, what)


# --------------------------------------------------------------------------- pairs
@dataclass(frozen=True)
class Pair:
    """A real pair: ``src``, ``ref`` as ``(N, 3) float64`` metres; ``gt`` ``T_ref_src``."""

    name: str
    src: np.ndarray
    ref: np.ndarray
    gt: np.ndarray


def _kitti_xyz(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype="<f4").reshape(-1, 4)[:, :3].astype(np.float64)


def load_pair(name: str, root: Path = SHARED_DATA) -> Pair:
    """One of :data:`PAIR_NAMES` from ``../shared/data``."""
    if name == "3dmatch-demo":  # redkitchen fragment 6 -> 0 (GeoTransformer's demo)
        d = root / "geotransformer_repo" / "demo"
        src, ref, gt = (np.load(d / f"{k}.npy") for k in ("src", "ref", "gt"))
        return Pair(name, src.astype(np.float64), ref.astype(np.float64), gt)
    if name == "kitti-94-95":  # KITTI 00 Velodyne scan 94 -> 95
        d = root / "kitti00_scancontext"
        meta = json.loads((d / "pairs.json").read_text())
        (entry,) = [
            p
            for p in meta["pairs"]
            if (p["src_file"], p["ref_file"]) == ("000094.bin", "000095.bin")
        ]
        gt = np.asarray(entry["T_ref_from_src"], np.float64)
        return Pair(name, _kitti_xyz(d / "000094.bin"), _kitti_xyz(d / "000095.bin"), gt)
    if name == "3dmatch-regtr-5-0":  # redkitchen fragment 5 -> 0 (RegTR's demo)
        d = root / "regtr_3dmatch_fragments"
        (entry,) = json.loads((d / "pairs.json").read_text())["pairs"]
        src, ref = (np.load(d / entry[k]).astype(np.float64) for k in ("src_file", "ref_file"))
        return Pair(name, src, ref, np.asarray(entry["T_ref_from_src_gtlog"], np.float64))
    raise KeyError(name)


PAIR_NAMES = ("3dmatch-demo", "kitti-94-95", "3dmatch-regtr-5-0")


# --------------------------------------------------------------------------- changes
Clouds = tuple[np.ndarray, np.ndarray]


def _identity(transform: np.ndarray) -> np.ndarray:
    return transform


@dataclass(frozen=True)
class Change:
    """An in-memory change of a pair: ``apply(src, ref) -> (src', ref')`` and
    ``map_back(T') -> T`` into the original frame. ``refusal_ok``: a refusal is an acceptable
    answer (it is not for changes that leave the input as valid as before: point order,
    dtype)."""

    name: str
    apply: Callable[[np.ndarray, np.ndarray], Clouds]
    map_back: Callable[[np.ndarray], np.ndarray] = _identity
    refusal_ok: bool = True


def offset_change(value: float, label: str) -> Change:
    """Both clouds moved by the same ``d`` (x = ``value``, like a UTM northing, with smaller
    y and z). ``T' = Tr(d) T Tr(-d)``, so ``T = Tr(-d) T' Tr(d)``."""
    d = value * np.array([1.0, -0.5, 0.01])

    def apply(src: np.ndarray, ref: np.ndarray) -> Clouds:
        return src + d, ref + d

    def back(t: np.ndarray) -> np.ndarray:
        return translation(-d) @ t @ translation(d)

    return Change(f"offset-{label}m", apply, back)


def units_change(scale: float, label: str) -> Change:
    """Both clouds scaled by ``scale`` (other units): ``t' = scale t``, ``R' = R``."""

    def apply(src: np.ndarray, ref: np.ndarray) -> Clouds:
        return src * scale, ref * scale

    def back(t: np.ndarray) -> np.ndarray:
        out = np.array(t, np.float64)
        out[:3, 3] /= scale
        return out

    return Change(f"units-{label}", apply, back)


def _permuted(points: np.ndarray, seed: int) -> np.ndarray:
    return points[np.random.default_rng(seed).permutation(len(points))]


def _duplicate_share(points: np.ndarray, share: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(points), size=round(share * len(points)), replace=False)
    return np.concatenate([points, points[np.sort(idx)]])


def with_outliers(points: np.ndarray, share: float, seed: int) -> np.ndarray:
    """``points`` plus ``share`` x N points uniform in the box of 100x the cloud's extent
    (per axis) around its bounding box's centre."""
    rng = np.random.default_rng(seed)
    lo, hi = points.min(0), points.max(0)
    centre, half = (lo + hi) / 2, 50.0 * (hi - lo)
    n = math.ceil(share * len(points))
    return np.concatenate([points, rng.uniform(centre - half, centre + half, (n, 3))])


CHANGES: dict[str, Change] = {
    c.name: c
    for c in (
        offset_change(1e3, "1e3"),
        offset_change(1e6, "1e6"),
        offset_change(4.2e6, "4.2e6"),
        units_change(1000.0, "x1000"),
        units_change(0.01, "x0.01"),
        Change("shuffled", lambda s, r: (_permuted(s, 1), _permuted(r, 2)), refusal_ok=False),
        Change("duplicated-all", lambda s, r: (np.repeat(s, 2, axis=0), np.repeat(r, 2, axis=0))),
        Change(
            "duplicated-10pct",
            lambda s, r: (_duplicate_share(s, 0.1, 3), _duplicate_share(r, 0.1, 4)),
        ),
        # not in the list: the in-memory twin of writing text with 6 decimals (what
        # the .xyz file does), a change 10^4 below the tolerance
        Change(
            "rounded-1um",
            lambda s, r: (np.round(s, 6), np.round(r, 6)),
            refusal_ok=False,
        ),
        Change(
            "float32",
            lambda s, r: (s.astype(np.float32), r.astype(np.float32)),
            refusal_ok=False,
        ),
        Change(
            "outliers-1pct", lambda s, r: (with_outliers(s, 0.01, 5), with_outliers(r, 0.01, 6))
        ),
    )
}


# --------------------------------------------------------------------------- files
#: format id -> file suffix; every point format ``pcreg.io.read_points`` reads
FORMATS = {
    "ply-ascii": ".ply",
    "ply-binary": ".ply",
    "pcd-ascii": ".pcd",
    "pcd-binary": ".pcd",
    "pcd-binary-compressed": ".pcd",
    "npy": ".npy",
    "npz": ".npz",
    "bin": ".bin",
    "xyz": ".xyz",
    "txt": ".txt",
    "csv": ".csv",
    "las": ".las",
    "laz": ".laz",
}
TEXT_FORMATS = ("xyz", "txt", "csv")
#: LAS/LAZ coordinate scale: quantisation of at most 0.05 mm
LAS_SCALE = 1e-4


def write_cloud(path: Path, fmt: str, points: np.ndarray) -> Path:
    """Write ``points (N, 3) float64`` as ``fmt`` with a third-party writer (Open3D,
    numpy, laspy), the way a user's file would be made."""
    points = np.asarray(points, np.float64)
    if fmt.startswith(("ply", "pcd")):
        import open3d as o3d

        cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
        ok = o3d.io.write_point_cloud(
            str(path),
            cloud,
            write_ascii=fmt.endswith("ascii"),
            compressed=fmt.endswith("compressed"),
        )
        assert ok, f"Open3D could not write {path}"
    elif fmt == "npy":
        np.save(path, points)
    elif fmt == "npz":
        np.savez(path, points=points)
    elif fmt == "bin":  # KITTI Velodyne records: float32 x, y, z, intensity
        records = np.zeros((len(points), 4), "<f4")
        records[:, :3] = points
        records.tofile(path)
    elif fmt == "xyz":
        np.savetxt(path, points, fmt="%.6f")
    elif fmt == "txt":
        np.savetxt(path, points, fmt="%.17g")
    elif fmt == "csv":
        np.savetxt(path, points, fmt="%.9f", delimiter=",", header="x,y,z", comments="")
    elif fmt in ("las", "laz"):
        import laspy

        header = laspy.LasHeader(point_format=0, version="1.2")
        header.scales = np.full(3, LAS_SCALE)
        header.offsets = np.floor(points.min(0))
        las = laspy.LasData(header)
        las.x, las.y, las.z = points[:, 0], points[:, 1], points[:, 2]
        las.write(str(path))  # .laz: compressed with the lazrs backend
    else:
        raise KeyError(fmt)
    return path


def truncated_prefix_is_valid(fmt: str, data: bytes) -> bool:
    """Whether ``data``, a prefix of a file of format ``fmt``, is itself a well-formed file
    that no reader can tell from a complete one.

    Only the formats without a point count do so: KITTI ``.bin`` (no header at all) cut at a
    16-byte record boundary, and text cut where the last (partial) line still holds as many
    numbers as the others (at a line boundary, or inside the last number). Every other format
    declares its size (PLY/PCD/LAS header counts, the ``.npy`` shape, the zip directory at the
    end of ``.npz``, LAZ's chunk table) and a prefix of it must be refused."""
    if fmt == "bin":
        return len(data) % 16 == 0
    if fmt not in TEXT_FORMATS:
        return False
    text = data.decode("utf-8")
    last = text.rsplit("\n", 1)[-1].replace(",", " ").split()
    if not last:
        return True  # cut at a line boundary
    try:
        values = [float(v) for v in last]
    except ValueError:
        return False
    return len(values) == 3 and all(math.isfinite(v) for v in values)
