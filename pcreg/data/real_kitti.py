"""Real KITTI training pairs beside the synthetic ones: a mixed outdoor training root.

The synthetic streets teach the outdoor model geometry, but not the look of a real HDL-64E sweep
(ring pattern, range-dependent density, vegetation, cars). ``../shared/train_data/
kitti_seq00-07_semantickitti_mini`` holds 33 real sweeps of KITTI sequences 00-07 with
SemanticKITTI poses and 52 pairs (``pairs.json``: ``T_ref_src``, ``ref = T src``, 0.26-13.6 m
apart). :func:`write_mixed_outdoor_root` writes a KITTI-layout root whose training split lists
the synthetic pairs plus the real ones (both directions, repeated ``repeat`` times), and whose
validation split is the synthetic validation split unchanged, so validation numbers stay
comparable with a synthetic-only run.

Real scans become ``downsampled/<REAL_SEQ_BASE + seq>/<frame:06d>.npy`` (float32 xyz, metres);
the synthetic sequence folders are symlinked, not copied.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np

from pcreg._fs import atomic_output, check_writable
from pcreg.errors import MissingFileError
from pcreg.io import read_points, validate_transform

__all__ = ["REAL_SEQ_BASE", "real_kitti_records", "write_mixed_outdoor_root"]

logger = logging.getLogger(__name__)

#: sequence ids of the real scans in the mixed root (synthetic streets use 0..~10^6+).
REAL_SEQ_BASE = 2_000_000


def real_kitti_records(
    real_root: str | os.PathLike[str],
    out_root: str | os.PathLike[str],
    *,
    both_directions: bool = True,
) -> list[dict]:
    """Convert the real sweeps of ``real_root`` into ``out_root/downsampled`` and return records.

    Returns:
        KITTI-layout metadata records (``pcd0`` = reference, ``pcd1`` = source, ``transform``
        4x4 with ``ref = T src``), one per pair and direction.

    Raises:
        MissingFileError: ``real_root/pairs.json`` or a listed scan is missing.
        NonRigidTransformError: a pair transform is not rigid.
    """
    real_root, out_root = Path(real_root), Path(out_root)
    meta = real_root / "pairs.json"
    if not meta.is_file():
        raise MissingFileError(meta, "real KITTI pair list not found")
    pairs = json.loads(meta.read_text())["pairs"]
    written: dict[str, str] = {}

    def scan(rel: str, seq: int, frame: int) -> str:
        if rel not in written:
            out_rel = f"downsampled/{REAL_SEQ_BASE + seq}/{frame:06d}.npy"
            dest = out_root / out_rel
            if not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                with atomic_output(dest, overwrite=False) as tmp:
                    np.save(tmp, read_points(real_root / rel).astype(np.float32))
            written[rel] = out_rel
        return written[rel]

    records = []
    for p in pairs:
        seq = int(p["seq"])
        t = validate_transform(np.asarray(p["T_ref_src"]), f"{meta} ({p['ref']} <- {p['src']})")
        ref = scan(p["ref"], seq, int(p["ref_frame"]))
        src = scan(p["src"], seq, int(p["src_frame"]))
        ends = [(ref, int(p["ref_frame"]), src, int(p["src_frame"]), t)]
        if both_directions:
            ends.append((src, int(p["src_frame"]), ref, int(p["ref_frame"]), np.linalg.inv(t)))
        for r, rf, s, sf, tr in ends:
            records.append(
                {
                    "seq_id": REAL_SEQ_BASE + seq,
                    "frame0": rf,
                    "frame1": sf,
                    "pcd0": r,
                    "pcd1": s,
                    "transform": tr.tolist(),
                    "source": "real",
                }
            )
    return records


def write_mixed_outdoor_root(
    synthetic_root: str | os.PathLike[str],
    real_root: str | os.PathLike[str],
    out_root: str | os.PathLike[str],
    *,
    repeat: int = 2,
    overwrite: bool = False,
) -> dict[str, int]:
    """Write ``out_root`` = synthetic outdoor root + real KITTI pairs in its training split.

    Args:
        synthetic_root: a root written by ``write_outdoor_dataset`` (``metadata/train.json``,
            ``metadata/val.json``, ``downsampled/``).
        real_root: the real-scan folder with ``pairs.json``.
        out_root: the new root; its metadata files are never silently replaced.
        repeat: how many times each real pair (and direction) is listed, to weight the 52 real
            pairs against the synthetic ones.

    Returns:
        ``{"synthetic": n, "real": m}`` training records written.
    """
    syn, out = Path(synthetic_root).resolve(), Path(out_root)
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    train_meta = syn / "metadata" / "train.json"
    for need in (train_meta, syn / "downsampled"):
        if not need.exists():
            raise MissingFileError(need, "synthetic outdoor root is incomplete")
    (out / "metadata").mkdir(parents=True, exist_ok=True)
    for split in ("train", "val"):  # refuse before writing anything
        check_writable(out / "metadata" / f"{split}.json", overwrite=overwrite)
    (out / "downsampled").mkdir(exist_ok=True)
    for d in sorted((syn / "downsampled").iterdir()):
        link = out / "downsampled" / d.name
        if not link.exists():
            link.symlink_to(d, target_is_directory=True)
    synthetic = json.loads(train_meta.read_text())
    real = real_kitti_records(real_root, out)
    train = synthetic + real * repeat
    with atomic_output(out / "metadata" / "train.json", overwrite=overwrite) as tmp:
        tmp.write_text(json.dumps(train, indent=1))
    val = syn / "metadata" / "val.json"
    if val.is_file():
        with atomic_output(out / "metadata" / "val.json", overwrite=overwrite) as tmp:
            tmp.write_text(val.read_text())
    logger.info(
        "%s: %d synthetic + %d real (x%d) training pairs", out, len(synthetic), len(real), repeat
    )
    return {"synthetic": len(synthetic), "real": len(real) * repeat}
