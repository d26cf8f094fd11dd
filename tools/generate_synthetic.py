"""Write a synthetic dataset in the layout the real loaders read, plus two pictures.

    python tools/generate_synthetic.py indoor  OUT --split val --scenes 20 --seed 100000
    python tools/generate_synthetic.py outdoor OUT --split val --scenes 10 --seed 200000

Indoor writes OUT/data/<split>/<room>/cloud_bin_<k>.npy + OUT/metadata/<split>.json (3DMatch
layout); outdoor OUT/downsampled/<street>/<scan>.npy + OUT/metadata/<split>.json (KITTI
layout). OUT/<split>_overlap.png and OUT/<split>_samples.png show the overlap histogram and a
few pairs aligned by their ground truth.
"""

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

from pcreg.data.synthetic.pairs import SyntheticPair
from pcreg.data.synthetic.report import save_overlap_histogram_png, save_sample_pairs_png
from pcreg.data.synthetic.writer import write_indoor_dataset, write_outdoor_dataset
from pcreg.data.threedmatch import load_fragment

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("kind", choices=["indoor", "outdoor"])
    p.add_argument("out", type=Path)
    p.add_argument("--split", default="train")
    p.add_argument("--scenes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="replace an existing split")
    a = p.parse_args()
    if a.kind == "indoor":
        recs = write_indoor_dataset(a.out, a.split, a.scenes, a.seed, overwrite=a.force)
        base = a.out / "data"
    else:
        recs = write_outdoor_dataset(a.out, a.split, a.scenes, a.seed, overwrite=a.force)
        base = a.out
    ovs = [r["overlap"] for r in recs]
    save_overlap_histogram_png(ovs, a.out / f"{a.split}_overlap.png",
                               f"{a.kind} {a.split}: {len(recs)} pairs from {a.scenes} scenes")
    picks = np.random.default_rng(0).choice(len(recs), min(3, len(recs)), replace=False)
    samples = []
    for i in picks:
        r = recs[int(i)]
        t = np.eye(4)
        if "transform" in r:
            t = np.asarray(r["transform"])
        else:
            t[:3, :3], t[:3, 3] = np.asarray(r["rotation"]), np.asarray(r["translation"])
        samples.append(SyntheticPair(load_fragment(base / r["pcd0"]), load_fragment(base / r["pcd1"]),
                                     t, r["overlap"], r.get("scene_name", str(r.get("seq_id"))),
                                     r.get("frag_id0", r.get("frame0")), r.get("frag_id1", r.get("frame1"))))
    save_sample_pairs_png(samples, a.out / f"{a.split}_samples.png")
    print(f"{len(recs)} pairs; overlap min {min(ovs):.2f} median {np.median(ovs):.2f} max {max(ovs):.2f}")
    sys.exit(0)
