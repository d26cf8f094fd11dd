"""The mixed outdoor root: synthetic pairs kept, real pairs added in both directions with the
right transforms and scans, validation split untouched, nothing silently overwritten."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pcreg.data.kitti import KittiPairs
from pcreg.data.real_kitti import REAL_SEQ_BASE, write_mixed_outdoor_root
from pcreg.errors import NonRigidTransformError, OutputExistsError


def _yaw(deg: float, t: tuple[float, float, float]) -> np.ndarray:
    a = np.deg2rad(deg)
    m = np.eye(4)
    m[:2, :2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    m[:3, 3] = t
    return m


def _roots(tmp_path, transform):
    rng = np.random.default_rng(0)
    syn = tmp_path / "syn"
    (syn / "downsampled" / "000000").mkdir(parents=True)
    (syn / "metadata").mkdir()
    np.save(syn / "downsampled" / "000000" / "000000.npy", rng.normal(size=(50, 3)).astype("f4"))
    rec = {
        "seq_id": 0,
        "frame0": 0,
        "frame1": 0,
        "pcd0": "downsampled/000000/000000.npy",
        "pcd1": "downsampled/000000/000000.npy",
        "transform": np.eye(4).tolist(),
    }
    (syn / "metadata" / "train.json").write_text(json.dumps([rec] * 3))
    (syn / "metadata" / "val.json").write_text(json.dumps([rec]))
    real = tmp_path / "real"
    velo = real / "sequences" / "04" / "velodyne"
    velo.mkdir(parents=True)
    src = rng.uniform(-20, 20, size=(200, 3)).astype("f4")
    ref = (src @ transform[:3, :3].T + transform[:3, 3]).astype("f4")
    for frame, pts in ((0, src), (3, ref)):
        rows = np.concatenate([pts, rng.uniform(0, 1, (len(pts), 1)).astype("f4")], 1)
        rows.astype("<f4").tofile(velo / f"{frame:06d}.bin")
    pair = {
        "seq": "04",
        "src": "sequences/04/velodyne/000000.bin",
        "ref": "sequences/04/velodyne/000003.bin",
        "src_frame": 0,
        "ref_frame": 3,
        "T_ref_src": transform.tolist(),
    }
    (real / "pairs.json").write_text(json.dumps({"pairs": [pair]}))
    return syn, real, src, ref


def test_mixed_root_lists_real_pairs_both_ways_with_their_scans(tmp_path):
    t = _yaw(30.0, (4.0, -1.0, 0.1))
    syn, real, _, ref = _roots(tmp_path, t)
    out = tmp_path / "mix"
    counts = write_mixed_outdoor_root(syn, real, out, repeat=3)
    assert counts == {"synthetic": 3, "real": 6}
    train = KittiPairs(out, "train")
    assert len(train) == 9
    reals = [i for i, r in enumerate(train.records) if r.seq == REAL_SEQ_BASE + 4]
    assert len(reals) == 6
    directions = set()
    for i in reals:
        s_pts, r_pts, tr, rec = train[i]
        # the ground truth maps this record's source onto its reference, point for point
        assert np.allclose(s_pts @ tr[:3, :3].T + tr[:3, 3], r_pts, atol=1e-4)
        directions.add((rec.ref_frame, rec.src_frame))
    assert directions == {(3, 0), (0, 3)}
    assert np.array_equal(train[reals[0]][1], ref)  # xyz kept, reflectance dropped
    assert len(KittiPairs(out, "val")) == 1
    assert (out / "downsampled" / "000000").is_symlink()
    with pytest.raises(OutputExistsError):
        write_mixed_outdoor_root(syn, real, out)


def test_non_rigid_pair_transform_is_refused(tmp_path):
    t = _yaw(10.0, (1.0, 0.0, 0.0))
    t[:3, :3] *= 1.1
    syn, real, _, _ = _roots(tmp_path, t)
    with pytest.raises(NonRigidTransformError, match=r"pairs\.json"):
        write_mixed_outdoor_root(syn, real, tmp_path / "mix")
