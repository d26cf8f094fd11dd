"""ModelNet40 (RPMNet protocol) on a tiny file in PointNet's HDF5 format."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import cKDTree

from pcreg.data.modelnet import ModelNetPairs
from pcreg.errors import MissingFileError

h5py = pytest.importorskip("h5py")


@pytest.fixture
def root(tmp_path, rng):
    folder = tmp_path / "modelnet40_ply_hdf5_2048"
    folder.mkdir()
    data = rng.normal(size=(6, 2048, 3)).astype(np.float32)
    data /= np.linalg.norm(data, axis=2, keepdims=True)  # points on unit spheres...
    data *= rng.uniform(0.5, 1.0, size=(6, 1, 3)).astype(np.float32)  # ... squashed
    with h5py.File(folder / "ply_data_test0.h5", "w") as h5:
        h5["data"] = data
        h5["label"] = np.array([[0], [1], [2], [0], [1], [2]], np.uint8)
    (folder / "shape_names.txt").write_text("airplane\nbathtub\nbed\n")
    return tmp_path


def test_pairs_follow_the_protocol(root):
    ds = ModelNetPairs(root, "test")
    assert len(ds) == 6
    src, ref, t, rec = ds[1]
    assert rec.category == "bathtub"
    assert abs(len(ref) - 717) <= 2 and abs(len(src) - 717) <= 2
    assert np.linalg.norm(t[:3, 3]) < 0.5 * np.sqrt(3) * 2  # translation bound (+ rotation of it)
    angle = np.degrees(np.arccos(np.clip((np.trace(t[:3, :3]) - 1) / 2, -1, 1)))
    assert angle < 80  # three Euler angles of at most 45 deg each
    moved = src @ t[:3, :3].T + t[:3, 3]
    d, _ = cKDTree(ref).query(moved)
    assert np.mean(d < 0.05) > 0.3  # partial overlap, aligned by the ground truth
    src2, _ref2, t2, _ = ds[1]
    assert np.array_equal(src, src2) and np.array_equal(t, t2)  # deterministic
    assert len(ModelNetPairs(root, "test", categories=["bed"])) == 2


def test_missing_files(tmp_path):
    with pytest.raises(MissingFileError, match="ply_data_train"):
        ModelNetPairs(tmp_path, "train")
