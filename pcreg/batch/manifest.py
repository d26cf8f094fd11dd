"""Manifests: the pairs a batch registers, as CSV or JSON Lines.

Each row names a source and a reference cloud (paths relative to the manifest's folder, or
absolute), optionally an ``id`` (default ``"<src> -> <ref>"``: what a resumed run recognises a
finished pair by) and a ground truth ``gt``: ``T_ref_src`` as a path to a 4x4 text / ``.npy``
file or, in JSON Lines, 16 numbers (row-major) or a nested 4x4 list.

CSV::

    src,ref,gt
    scans/000001.bin,scans/000000.bin,gt/000001.txt

JSON Lines::

    {"src": "cloud_bin_6.ply", "ref": "cloud_bin_0.ply", "gt": [1, 0, 0, 0, ...]}

:func:`dataset_manifest` turns a 3DMatch- or KITTI-layout dataset's metadata into one.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pcreg._fs import atomic_output
from pcreg.errors import InputError, MissingFileError

__all__ = ["ManifestPair", "dataset_manifest", "read_manifest", "write_manifest"]


@dataclass(frozen=True)
class ManifestPair:
    """One pair: ``id``, absolute ``src`` / ``ref`` paths, and ``gt`` ``(4, 4) float64``
    ``T_ref_src`` or None."""

    id: str
    src: str
    ref: str
    gt: np.ndarray | None = None

    def to_json(self) -> dict:
        out = {"id": self.id, "src": self.src, "ref": self.ref}
        if self.gt is not None:
            out["gt"] = np.asarray(self.gt, np.float64).reshape(16).tolist()
        return out


def _gt(value: object, base: Path, where: str) -> np.ndarray | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        from pcreg.io import read_transform

        path = Path(value) if os.path.isabs(value) else base / value
        return read_transform(path)
    try:
        gt = np.asarray(value, np.float64).reshape(4, 4)
    except (TypeError, ValueError):
        raise InputError(where, "gt must be a path, 16 numbers or a 4x4 list") from None
    from pcreg.io import validate_transform

    return validate_transform(gt, where)  # finite, rigid (no scaling or shear)


def read_manifest(path: str | os.PathLike[str]) -> list[ManifestPair]:
    """The pairs of a ``.csv`` or ``.jsonl`` manifest, in file order.

    Raises:
        MissingFileError: no manifest; InputError: an unknown extension, a row without
            ``src`` / ``ref``, a bad ``gt``, or two rows with one id.
    """
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(path, "manifest not found")
    base = path.resolve().parent
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's byte-order mark: dropped
    except UnicodeDecodeError:
        raise InputError(path, "is not UTF-8 text") from None
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        names = [n.strip() for n in reader.fieldnames or []]
        twice = sorted({n for n in names if n and names.count(n) > 1})
        if twice:  # DictReader keeps the last column of a name: which one was meant?
            raise InputError(path, f"the header names {', '.join(map(repr, twice))} twice")
        rows = []
        for k, row in enumerate(reader, 1):
            extra = row.pop(None, None)  # more fields than the header names
            if extra and any(str(field).strip() for field in extra):  # a trailing comma is fine
                raise InputError(f"{path}: row {k}", "has more fields than the header names")
            rows.append(row)
    elif path.suffix.lower() in (".jsonl", ".ndjson"):
        rows = []
        for k, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise InputError(path, f"line {k} is not JSON ({err.msg})") from None
    else:
        raise InputError(path, "a manifest is .csv or .jsonl")
    pairs, seen = [], set()
    for k, row in enumerate(rows, 1):
        where = f"{path}: row {k}"
        if not isinstance(row, dict) or not row.get("src") or not row.get("ref"):
            raise InputError(where, "needs 'src' and 'ref'")
        if not isinstance(row["src"], str) or not isinstance(row["ref"], str):
            raise InputError(where, "'src' and 'ref' must be paths (strings)")
        src, ref = (
            str(base / row[c]) if not os.path.isabs(row[c]) else row[c] for c in ("src", "ref")
        )
        pid = str(row.get("id") or f"{row['src']} -> {row['ref']}")
        if pid in seen:
            raise InputError(where, f"id {pid!r} appears twice")
        seen.add(pid)
        pairs.append(ManifestPair(pid, src, ref, _gt(row.get("gt"), base, where)))
    if not pairs:
        raise InputError(path, "lists no pairs")
    return pairs


def write_manifest(
    pairs: list[ManifestPair], path: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write ``pairs`` as JSON Lines (absolute paths, ``gt`` as 16 numbers), atomically."""
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text("".join(json.dumps(p.to_json()) + "\n" for p in pairs))
    return Path(path)


def dataset_manifest(
    root: str | os.PathLike[str], layout: str = "threedmatch", benchmark: str | None = None
) -> list[ManifestPair]:
    """The pairs of a dataset as a manifest: ``layout`` ``"threedmatch"`` (metadata
    ``benchmark`` of a 3DMatch-layout root, default ``3DMatch``) or ``"kitti"`` (a KITTI
    odometry root, ``benchmark`` the split name, default ``test``), with their ground truth
    (KITTI: the poses as published, not ICP-refined as ``pcreg evaluate`` refines them).

    Raises:
        InputError: an unknown layout or split, no pairs, or pairs whose clouds are not
            there (metadata without its fragments or scans): the first missing file and how
            many are missing are named, and nothing is returned."""
    root = Path(root)
    if layout == "threedmatch":
        from pcreg.data.threedmatch import ThreeDMatchPairs

        def fragment(rel: str) -> str:  # load_fragment's own fallback: a .npy beside a .pth
            path = (root / "data" / rel).resolve()
            npy = path.with_suffix(".npy")
            return str(
                npy if path.suffix == ".pth" and not path.is_file() and npy.is_file() else path
            )

        ds = ThreeDMatchPairs(root, benchmark or "3DMatch")
        pairs = [
            ManifestPair(
                f"{r.scene}/{r.src_id}->{r.ref_id}",
                fragment(r.src_path),
                fragment(r.ref_path),
                np.asarray(r.transform, np.float64),
            )
            for r in ds.records
        ]
        return _existing(pairs, root)
    if layout == "kitti":
        from pcreg.data.kitti import KittiPairs

        ds = KittiPairs(root, benchmark or "test", refine=False)
        if not ds.records:
            raise ds.no_pairs("--benchmark {}")
        pairs = [
            ManifestPair(
                f"{r.seq:02d}/{r.src_frame:06d}->{r.ref_frame:06d}",
                str(ds.scan_path(r.seq, r.src_frame, r.src_path)),
                str(ds.scan_path(r.seq, r.ref_frame, r.ref_path)),
                np.asarray(r.transform, np.float64),
            )
            for r in ds.records
        ]
        return _existing(pairs, root)
    raise InputError("layout", f"must be threedmatch or kitti, got {layout!r}")


def _existing(pairs: list[ManifestPair], root: Path) -> list[ManifestPair]:
    """``pairs`` when every cloud they name is a file; else the InputError naming the first
    missing one and how many of the pairs' files are missing (metadata without its data)."""
    files = list(dict.fromkeys(f for p in pairs for f in (p.src, p.ref)))
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        are = "is" if len(missing) == 1 else "are"
        raise MissingFileError(
            missing[0],
            f"not found: {len(missing)} of the {len(files)} clouds the {len(pairs)} pairs "
            f"of {root} name {are} missing (metadata without its data? 3DMatch fragments go "
            "under ROOT/data, KITTI scans under ROOT/sequences/NN/velodyne)",
        )
    return pairs
