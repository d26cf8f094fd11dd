"""The synthetic generator: determinism, ground truth, overlap, sensor geometry, the writer."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.spatial import cKDTree

from pcreg.data.synthetic import indoor_pairs, outdoor_pairs, overlap_ratio
from pcreg.data.synthetic.pairs import indoor_fragments
from pcreg.data.synthetic.report import dataset_report
from pcreg.data.synthetic.writer import write_indoor_dataset, write_outdoor_dataset
from pcreg.data.threedmatch import ThreeDMatchPairs


@pytest.fixture(scope="module")
def rooms():
    return indoor_pairs(3), indoor_pairs(4)


def test_deterministic_by_seed(rooms):
    again = indoor_pairs(3)
    assert len(again) == len(rooms[0])
    for a, b in zip(again, rooms[0], strict=True):
        assert np.array_equal(a.src, b.src) and np.array_equal(a.transform, b.transform)
    assert not np.array_equal(rooms[0][0].src[:100], rooms[1][0].src[:100])


def test_indoor_pairs_align_under_ground_truth(rooms):
    pairs = [p for p in rooms[0] + rooms[1] if p.overlap > 0.3]
    assert pairs
    for p in pairs:
        moved = p.src @ p.transform[:3, :3].T + p.transform[:3, 3]
        d, _ = cKDTree(p.ref).query(moved, k=1)
        close = d[d < 0.0375]
        # on the overlap the clouds agree to the voxel/noise level (2.5 cm voxels)
        assert np.sqrt(np.mean(close**2)) < 0.02
        assert np.isclose(p.overlap, np.mean(d < 0.0375))
        r = p.transform[:3, :3]
        assert np.allclose(r @ r.T, np.eye(3), atol=1e-9) and np.isclose(np.linalg.det(r), 1)
        # a wrong transform destroys the overlap
        wrong = p.transform.copy()
        wrong[:3, 3] += 0.5
        assert overlap_ratio(p.src, p.ref, wrong, 0.0375) < 0.5 * p.overlap


def test_indoor_fragments_look_like_3dmatch():
    frags, _poses = indoor_fragments(5)
    sizes = [len(f) for f in frags]
    assert max(sizes) > 5000
    f = frags[int(np.argmax(sizes))]
    # 2.5 cm voxels: nearest-neighbor spacing close to the voxel size
    d, _ = cKDTree(f).query(f, k=2)
    assert 0.012 < np.median(d[:, 1]) < 0.03
    # camera frame: points in front of the camera (z forward), within the working range
    assert np.percentile(f[:, 2], 5) > -1.0 and np.linalg.norm(f, axis=1).max() < 8.0


def test_overlap_bins_cover_lomatch_and_match():
    ovs = [p.overlap for s in range(6, 10) for p in indoor_pairs(s)]
    assert any(0.1 < o <= 0.3 for o in ovs) and any(o > 0.3 for o in ovs)
    assert all(o > 0.1 for o in ovs)


def test_outdoor_pairs_are_kitti_like():
    pairs = outdoor_pairs(2, num_scans=3)
    assert len(pairs) == 2
    for p in pairs:
        assert 8.0 < np.linalg.norm(p.transform[:3, 3]) < 12.0
        assert 80_000 < len(p.src) < 140_000  # an HDL-64E sweep is ~120k points
        assert np.linalg.norm(p.src, axis=1).max() < 80.0
        # sensor 1.73 m above the ground: the ground sits near z = -1.73 in the sensor frame
        near = p.src[np.linalg.norm(p.src[:, :2], axis=1) < 12]
        assert abs(np.percentile(near[:, 2], 5) + 1.73) < 0.3
        assert p.overlap > 0.3


def test_writer_round_trips_through_the_loader(tmp_path):
    records = write_indoor_dataset(tmp_path / "indoor", "val", num_scenes=1, seed=11)
    ds = ThreeDMatchPairs(tmp_path / "indoor", "val")
    assert len(ds) == len(records) > 0
    src, ref, t, rec = ds[0]
    assert ref.dtype == np.float32 and rec.scene == "room-000011"
    assert np.isclose(overlap_ratio(src, ref, t, 0.0375), rec.overlap)
    with pytest.raises(Exception, match="already exists"):
        write_indoor_dataset(tmp_path / "indoor", "val", num_scenes=1, seed=11)
    out = write_outdoor_dataset(tmp_path / "outdoor", "val", 1, seed=3, scans_per_street=2)
    meta = json.loads((tmp_path / "outdoor" / "metadata" / "val.json").read_text())
    assert meta == out and (tmp_path / "outdoor" / meta[0]["pcd1"]).is_file()


def test_dataset_report_reads_what_the_pictures_show(tmp_path):
    records = write_indoor_dataset(tmp_path / "indoor", "val", num_scenes=1, seed=11)
    rep = dataset_report(tmp_path / "indoor", "indoor", "val", records, 1, samples=2)
    assert rep.title == f"indoor val: {len(records)} pairs from 1 scenes"
    assert rep.overlaps == [r["overlap"] for r in records]
    assert rep.overlap_png == tmp_path / "indoor" / "val_overlap.png"
    assert rep.samples_png == tmp_path / "indoor" / "val_samples.png"
    assert len(rep.samples) == 2 and rep.summary.startswith(f"{len(records)} pairs; overlap min")
    ds = ThreeDMatchPairs(tmp_path / "indoor", "val")
    for title, src, ref, t in rep.samples:  # the rows match the loader's pairs
        scene, ids = title.split(",")[0].split(" ")
        k = next(
            i for i, r in enumerate(ds.records)
            if (r.scene, f"{r.ref_id}<-{r.src_id}") == (scene, ids)
        )  # fmt: skip
        src_k, ref_k, t_k, _ = ds[k]
        assert np.array_equal(ref, ref_k) and np.array_equal(src, src_k)
        assert np.allclose(t, t_k)
    out = write_outdoor_dataset(tmp_path / "outdoor", "val", 1, seed=3, scans_per_street=2)
    rep = dataset_report(tmp_path / "outdoor", "outdoor", "val", out, 1, samples=5)
    assert len(rep.samples) == min(5, len(out))
    title, src, ref, t = rep.samples[0]
    assert title.startswith("street-") and t.shape == (4, 4) and ref.shape[1] == 3
