"""ModelNet40 pairs under the RPMNet protocol (Yew & Lee, CVPR 2020; as used by
GeoTransformer): partial, overlapping views of the same object.

Files: ``<root>/modelnet40_ply_hdf5_2048/ply_data_{train,test}*.h5`` (PointNet's release:
``data (S, 2048, 3)``, ``label (S, 1)``) and ``shape_names.txt``. Needs ``h5py``.

Per pair (deterministic by ``seed`` and index): 1024 of the 2048 points; source and reference
are copies cropped independently by a random plane keeping 70 % of the points; the source is
moved by a random rigid motion (Euler angles uniform in +-45 deg about x, y, z; translation
uniform in +-0.5 per axis); both get Gaussian noise (sigma 0.01, clipped at 0.05). Returned
transform: ``ref = T @ src``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pcreg.data.transforms import crop_by_plane
from pcreg.errors import InputError, MissingFileError

__all__ = ["ModelNetPairs", "ModelNetRecord"]


@dataclass(frozen=True)
class ModelNetRecord:
    index: int
    label: int
    category: str

    @property
    def scene(self) -> str:
        return self.category


def _euler_rotation(angles: np.ndarray) -> np.ndarray:
    out = np.eye(3)
    for axis, a in enumerate(angles):
        c, s = np.cos(a), np.sin(a)
        r = np.eye(3)
        i, j = [(1, 2), (0, 2), (0, 1)][axis]
        r[i, i], r[i, j], r[j, i], r[j, j] = c, -s, s, c
        out = r @ out
    return out


class ModelNetPairs:
    """``pairs[i]`` -> ``(src (~717, 3), ref (~717, 3), T (4, 4), record)``."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        split: str = "test",
        categories: list[str] | None = None,
        seed: int = 0,
        num_points: int = 1024,
        keep: float = 0.7,
        rotation_deg: float = 45.0,
        translation: float = 0.5,
        noise: float = 0.01,
        noise_clip: float = 0.05,
    ) -> None:
        try:
            import h5py
        except ImportError:
            raise InputError(
                "modelnet", "reading ModelNet40 needs h5py: pip install h5py"
            ) from None
        folder = Path(root) / "modelnet40_ply_hdf5_2048"
        files = sorted(folder.glob(f"ply_data_{split}*.h5"))
        if not files:
            raise MissingFileError(folder, f"no ply_data_{split}*.h5 files")
        names_file = folder / "shape_names.txt"
        names = names_file.read_text().split() if names_file.is_file() else []
        points, labels = [], []
        for f in files:
            with h5py.File(f, "r") as h5:
                points.append(np.asarray(h5["data"], np.float32))
                labels.append(np.asarray(h5["label"]).reshape(-1).astype(int))
        self.points = np.concatenate(points)
        self.labels = np.concatenate(labels)
        self.names = names
        keep_idx = np.arange(len(self.labels))
        if categories is not None:
            wanted = {names.index(c) for c in categories}
            keep_idx = keep_idx[np.isin(self.labels, list(wanted))]
        self.index = keep_idx
        self.seed, self.num_points, self.keep = seed, num_points, keep
        self.rotation, self.translation = np.deg2rad(rotation_deg), translation
        self.noise, self.noise_clip = noise, noise_clip

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, ModelNetRecord]:
        k = int(self.index[i])
        rng = np.random.default_rng([self.seed, k])
        pts = self.points[k]
        pts = pts[rng.choice(len(pts), min(self.num_points, len(pts)), replace=False)]
        ref = crop_by_plane(pts, self.keep, rng)
        src = crop_by_plane(pts, self.keep, rng)
        motion = np.eye(4)
        motion[:3, :3] = _euler_rotation(rng.uniform(-self.rotation, self.rotation, 3))
        motion[:3, 3] = rng.uniform(-self.translation, self.translation, 3)
        src = src @ motion[:3, :3].T + motion[:3, 3]

        def jitter(p):
            return p + np.clip(
                rng.normal(0, self.noise, p.shape), -self.noise_clip, self.noise_clip
            )

        label = int(self.labels[k])
        name = self.names[label] if label < len(self.names) else str(label)
        ref = jitter(ref).astype(np.float32)  # the reference's noise is drawn first
        src = jitter(src).astype(np.float32)
        return src, ref, np.linalg.inv(motion), ModelNetRecord(k, label, name)
