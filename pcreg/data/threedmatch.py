"""3DMatch / 3DLoMatch: pair metadata, fragments and the official benchmark files.

Usual layout (GeoTransformer / PREDATOR preparation; see ``data/README.md``)::

    <root>/data/{train,test}/<scene>/cloud_bin_<k>.pth   (or .npy) float (N, 3), metres
    <root>/metadata/{3DMatch,3DLoMatch,train,val}.pkl    (or .json, as our generator writes)
    <root>/metadata/benchmarks/{3DMatch,3DLoMatch}/<scene>/{gt.log,gt.info,gt_overlap.log}

Metadata records: ``pcd0`` is the reference, ``pcd1`` the source, ``ref = R src + t``.
gt.log entries ``i j n`` + 4x4: fragment j (source) into fragment i (reference).
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from pcreg.errors import CorruptFileError, MissingFileError

__all__ = [
    "LogEntry",
    "PairRecord",
    "ThreeDMatchPairs",
    "load_fragment",
    "read_gt_info",
    "read_gt_log",
    "read_pair_metadata",
]


@dataclass(frozen=True)
class PairRecord:
    """One pair: ``ref`` / ``src`` paths relative to the data root, ``transform`` 4x4 float64
    (``ref = T src``), overlap, scene and fragment ids."""

    scene: str
    ref_id: int
    src_id: int
    ref_path: str
    src_path: str
    transform: np.ndarray
    overlap: float


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Metadata pickles hold dicts of numpy arrays; refuse any other global (no code runs)."""

    ALLOWED: ClassVar[set[tuple[str, str]]] = {
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        mod = module.replace("numpy.core", "numpy._core") if np.__version__ >= "2" else module
        return getattr(__import__(mod, fromlist=[name]), name)


def _load_records(path: Path) -> list[dict]:
    if not path.is_file():
        raise MissingFileError(path, "metadata file not found")
    try:
        if path.suffix == ".pkl":
            with open(path, "rb") as handle:
                return list(_NumpyOnlyUnpickler(handle).load())
        if path.suffix == ".json":
            return list(json.loads(path.read_text()))
    except (pickle.UnpicklingError, json.JSONDecodeError, EOFError, ValueError) as err:
        raise CorruptFileError(path, f"cannot read pair metadata ({err})") from None
    raise CorruptFileError(path, "pair metadata must be .pkl or .json")


def read_pair_metadata(path: str | os.PathLike[str]) -> list[PairRecord]:
    """3DMatch-style pair records from a GeoTransformer ``.pkl`` or our ``.json``."""
    out = []
    for r in _load_records(Path(path)):
        t = np.eye(4)
        t[:3, :3] = np.asarray(r["rotation"], np.float64)
        t[:3, 3] = np.asarray(r["translation"], np.float64)
        out.append(
            PairRecord(
                str(r["scene_name"]),
                int(r["frag_id0"]),
                int(r["frag_id1"]),
                str(r["pcd0"]),
                str(r["pcd1"]),
                t,
                float(r["overlap"]),
            )
        )
    return out


def load_fragment(path: str | os.PathLike[str]) -> np.ndarray:
    """A fragment ``(N, 3)`` float32 from ``.npy`` or a ``.pth`` holding a numpy array (read
    with numpy-only unpickling); a missing ``.pth`` falls back to ``.npy`` beside it."""
    path = Path(path)
    if not path.is_file() and path.suffix == ".pth" and path.with_suffix(".npy").is_file():
        path = path.with_suffix(".npy")
    if not path.is_file():
        raise MissingFileError(path, "fragment not found")
    if path.suffix == ".npy":
        points = np.load(path, allow_pickle=False)
    else:
        import torch

        safe = [np.core.multiarray._reconstruct, np.ndarray, np.dtype]  # type: ignore[attr-defined]
        with torch.serialization.safe_globals([*safe, type(np.dtype(np.float64))]):
            points = torch.load(path, map_location="cpu", weights_only=True)
        points = np.asarray(points)
    if points.ndim != 2 or points.shape[1] != 3:
        raise CorruptFileError(path, f"expected an (N, 3) array, got {points.shape}")
    return points.astype(np.float32)


class ThreeDMatchPairs:
    """Pairs of a 3DMatch-layout dataset. ``pairs[i]`` -> ``(src (M,3), ref (N,3), T (4,4),
    record)``; ``benchmark`` is a metadata stem (``3DMatch``, ``3DLoMatch``, ``train``,
    ``val``) or a path to a metadata file."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        benchmark: str = "3DMatch",
        metadata_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.root = Path(root)
        meta_dir = Path(metadata_dir) if metadata_dir else self.root / "metadata"
        candidate = Path(benchmark)
        if candidate.suffix in (".pkl", ".json"):
            path = candidate
        else:
            path = meta_dir / f"{benchmark}.pkl"
            if not path.is_file():
                path = meta_dir / f"{benchmark}.json"
        self.records = read_pair_metadata(path)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, PairRecord]:
        r = self.records[i]
        ref = load_fragment(self.root / "data" / r.ref_path)
        src = load_fragment(self.root / "data" / r.src_path)
        return src, ref, r.transform, r


@dataclass(frozen=True)
class LogEntry:
    """One gt.log / gt.info block: fragments ``i`` (reference) and ``j`` (source), the number
    of fragments of the scene, and the 4x4 transform or 6x6 information matrix."""

    i: int
    j: int
    num_fragments: int
    matrix: np.ndarray


def _read_blocks(path: Path, rows: int) -> list[LogEntry]:
    if not path.is_file():
        raise MissingFileError(path, "benchmark file not found")
    try:
        lines = [ln.split() for ln in path.read_text().splitlines() if ln.strip()]
    except UnicodeDecodeError:
        raise CorruptFileError(path, "not a text file (invalid UTF-8)") from None
    if len(lines) % (rows + 1):
        raise CorruptFileError(path, f"expected blocks of {rows + 1} lines, got {len(lines)} lines")
    out = []
    for b in range(0, len(lines), rows + 1):
        head = lines[b]
        try:
            m = np.array([[float(v) for v in ln] for ln in lines[b + 1 : b + 1 + rows]])
            out.append(LogEntry(int(head[0]), int(head[1]), int(head[2]), m))
        except (ValueError, IndexError):
            raise CorruptFileError(path, f"malformed block at line {b + 1}") from None
        if m.shape != (rows, rows):
            raise CorruptFileError(path, f"block at line {b + 1} is not {rows}x{rows}")
    return out


def read_gt_log(path: str | os.PathLike[str]) -> list[LogEntry]:
    """Blocks of ``i j n`` + 4x4 (``P_i = T P_j``). Also reads estimated ``.log`` files."""
    return _read_blocks(Path(path), 4)


def read_gt_info(path: str | os.PathLike[str]) -> list[LogEntry]:
    """Blocks of ``i j n`` + 6x6 information matrix."""
    return _read_blocks(Path(path), 6)


def write_log(
    path: str | os.PathLike[str], entries: list[LogEntry], overwrite: bool = False
) -> None:
    """Write a 3DMatch-format ``.log`` atomically (e.g. a method's estimates)."""
    from pcreg._fs import atomic_output

    text = []
    for e in entries:
        text.append(f"{e.i}\t{e.j}\t{e.num_fragments}")
        text += ["\t".join(f"{v:.10e}" for v in row) for row in e.matrix]
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text("\n".join(text) + "\n")
