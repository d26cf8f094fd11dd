"""3DMatch: real metadata counts, benchmark files, fragments aligned by their ground truth."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from scipy.spatial import cKDTree

from pcreg.data.threedmatch import load_fragment, read_gt_info, read_gt_log, read_pair_metadata
from pcreg.errors import CorruptFileError, MissingFileError


@pytest.mark.data
def test_real_metadata_counts_and_convention(shared_data):
    meta = shared_data / "geotransformer_repo" / "3DMatch" / "metadata"
    m = read_pair_metadata(meta / "3DMatch.pkl")
    lo = read_pair_metadata(meta / "3DLoMatch.pkl")
    assert (len(m), len(lo), len(read_pair_metadata(meta / "val.pkl"))) == (1623, 1781, 1331)
    assert len({r.scene for r in m}) == 8
    # (the pkl overlaps are GeoTransformer's own estimate, not the benchmark's 30 % cut)
    assert np.median([r.overlap for r in m]) > 2 * np.median([r.overlap for r in lo])
    # the pkl transform of redkitchen 0<-6 agrees with gt.log (pcd0 = ref, pcd1 = src)
    rec = next(r for r in m if r.scene == "7-scenes-redkitchen" and (r.ref_id, r.src_id) == (0, 6))
    log = read_gt_log(meta / "benchmarks" / "3DMatch" / "7-scenes-redkitchen" / "gt.log")
    entry = next(e for e in log if (e.i, e.j) == (0, 6))
    assert np.abs(rec.transform - entry.matrix).max() < 1e-3
    info = read_gt_info(meta / "benchmarks" / "3DMatch" / "7-scenes-redkitchen" / "gt.info")
    assert len(info) == len(log) and info[0].matrix.shape == (6, 6)


def _overlap_rmse(src, ref, t, radius=0.0375):
    moved = src @ t[:3, :3].T + t[:3, 3]
    d, _ = cKDTree(ref).query(moved, k=1, distance_upper_bound=radius)
    close = d[np.isfinite(d)]
    return float(np.sqrt(np.mean(close**2))), close.size / len(src)


@pytest.mark.data
def test_real_fragments_align_under_ground_truth(shared_data):
    demo = shared_data / "geotransformer_repo" / "demo"
    cases = [
        (load_fragment(demo / "ref.npy"), load_fragment(demo / "src.npy"), np.load(demo / "gt.npy"))
    ]
    frag = shared_data / "regtr_3dmatch_fragments"
    pairs = json.loads((frag / "pairs.json").read_text())
    p = pairs["pairs"][0] if isinstance(pairs, dict) else pairs[0]
    scene = frag / "7-scenes-redkitchen"
    files = sorted(scene.glob("cloud_bin_*.npy"))
    assert len(files) == 2
    t = np.asarray(next(v for k, v in p.items() if k.lower().startswith("t")))
    cases.append((load_fragment(files[0]), load_fragment(files[1]), t))
    for ref, src, gt in cases:
        rmse, frac = _overlap_rmse(src, ref, gt)
        assert rmse < 0.02 and frac > 0.2  # 2.5 cm voxels + sensor noise
        bad = gt.copy()
        bad[:3, 3] += 0.2
        assert _overlap_rmse(src, ref, bad)[1] < 0.5 * frac


def test_unpickler_refuses_foreign_globals(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "bad.pkl"
    path.write_bytes(pickle.dumps([Evil()]))
    with pytest.raises(CorruptFileError, match="not allowed"):
        read_pair_metadata(path)
    with pytest.raises(MissingFileError):
        read_pair_metadata(tmp_path / "none.pkl")
    (tmp_path / "short.log").write_text("0 1 2\n1 0 0 0\n")
    with pytest.raises(CorruptFileError, match="blocks of 5 lines"):
        read_gt_log(tmp_path / "short.log")


def test_binary_log_is_a_corrupt_file(tmp_path):
    from pcreg.data.threedmatch import read_gt_log
    from pcreg.errors import CorruptFileError

    path = tmp_path / "gt.log"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(CorruptFileError, match="not a text file"):
        read_gt_log(path)
