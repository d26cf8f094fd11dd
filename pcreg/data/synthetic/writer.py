"""Write synthetic datasets to disk in the layouts the real loaders read.

indoor (3DMatch-like)::

    <root>/data/<split>/<scene>/cloud_bin_<k>.npy        float32 (N, 3), fragment frame
    <root>/metadata/<split>.json                         records like GeoTransformer's pkl:
        {"scene_name", "frag_id0", "frag_id1", "pcd0" (ref), "pcd1" (src),
         "rotation", "translation" (ref = R src + t), "overlap"}

outdoor (KITTI-like)::

    <root>/downsampled/<seq>/<frame:06d>.npy            float32 (N, 3), sensor frame
    <root>/metadata/<split>.json                         {"seq_id", "frame0" (ref),
        "frame1" (src), "pcd0", "pcd1", "transform" (ref = T src), "overlap"}

All files are written atomically; an existing dataset is not overwritten without ``overwrite``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pcreg._fs import atomic_output, check_writable
from pcreg.data.synthetic.pairs import SyntheticPair, indoor_pairs, outdoor_pairs

__all__ = ["write_indoor_dataset", "write_outdoor_dataset"]

logger = logging.getLogger(__name__)


def _save_npy(path: Path, array: np.ndarray, overwrite: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not overwrite:
        return  # fragments are shared by several pairs
    with atomic_output(path, overwrite=True) as tmp:
        np.save(tmp, array.astype(np.float32))


def _metadata_path(root: Path, split: str, overwrite: bool) -> Path:
    path = root / "metadata" / f"{split}.json"
    if path.parent.is_dir():  # refuse before generating anything
        check_writable(path, overwrite=overwrite)
    return path


def _write_metadata(path: Path, records: list[dict], overwrite: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text(json.dumps(records, indent=1))
    logger.info("wrote %d pairs to %s", len(records), path.parent.parent)


def write_indoor_dataset(
    root: str | os.PathLike[str],
    split: str,
    num_scenes: int,
    seed: int,
    min_overlap: float = 0.1,
    overwrite: bool = False,
) -> list[dict]:
    """Generate ``num_scenes`` rooms (scene seeds ``seed .. seed + num_scenes - 1``) and write
    every pair with overlap above ``min_overlap``. Returns the metadata records."""
    root = Path(root)
    meta_path = _metadata_path(root, split, overwrite)
    records = []
    for s in tqdm(range(seed, seed + num_scenes), desc=f"indoor {split}", unit="room"):
        for p in indoor_pairs(s, min_overlap=min_overlap):
            records.append(_indoor_record(root, split, p, overwrite))
    _write_metadata(meta_path, records, overwrite)
    return records


def _indoor_record(root: Path, split: str, p: SyntheticPair, overwrite: bool) -> dict:
    rel0 = f"{split}/{p.scene}/cloud_bin_{p.ref_id}.npy"
    rel1 = f"{split}/{p.scene}/cloud_bin_{p.src_id}.npy"
    _save_npy(root / "data" / rel0, p.ref, overwrite)
    _save_npy(root / "data" / rel1, p.src, overwrite)
    return {
        "scene_name": p.scene,
        "frag_id0": p.ref_id,
        "frag_id1": p.src_id,
        "pcd0": rel0,
        "pcd1": rel1,
        "rotation": p.transform[:3, :3].tolist(),
        "translation": p.transform[:3, 3].tolist(),
        "overlap": p.overlap,
    }


def write_outdoor_dataset(
    root: str | os.PathLike[str],
    split: str,
    num_streets: int,
    seed: int,
    scans_per_street: int = 8,
    overwrite: bool = False,
) -> list[dict]:
    """Generate ``num_streets`` streets and write consecutive-scan pairs (~10 m apart)."""
    root = Path(root)
    meta_path = _metadata_path(root, split, overwrite)
    records = []
    for s in tqdm(range(seed, seed + num_streets), desc=f"outdoor {split}", unit="street"):
        for p in outdoor_pairs(s, scans_per_street):
            rel0 = f"downsampled/{s:06d}/{p.ref_id:06d}.npy"
            rel1 = f"downsampled/{s:06d}/{p.src_id:06d}.npy"
            _save_npy(root / rel0, p.ref, overwrite)
            _save_npy(root / rel1, p.src, overwrite)
            records.append(
                {
                    "seq_id": s,
                    "frame0": p.ref_id,
                    "frame1": p.src_id,
                    "pcd0": rel0,
                    "pcd1": rel1,
                    "transform": p.transform.tolist(),
                    "overlap": p.overlap,
                }
            )
    _write_metadata(meta_path, records, overwrite)
    return records
