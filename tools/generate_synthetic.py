"""Write a synthetic dataset in the layout the real loaders read, plus two pictures.

    python tools/generate_synthetic.py indoor  OUT --split val --scenes 20 --seed 100000
    python tools/generate_synthetic.py outdoor OUT --split val --scenes 10 --seed 200000

Indoor: OUT/data/<split>/<room>/cloud_bin_<k>.npy + OUT/metadata/<split>.json (3DMatch layout);
outdoor: OUT/downsampled/<street>/<scan>.npy + OUT/metadata/<split>.json (KITTI layout).
OUT/<split>_overlap.png and OUT/<split>_samples.png: overlap histogram and sample pairs.
"""

import argparse
import logging
from pathlib import Path

from pcreg.data.synthetic.report import dataset_report
from pcreg.data.synthetic.writer import write_indoor_dataset, write_outdoor_dataset
from pcreg.viz.pairs import save_overlap_histogram_png, save_pair_grid_png

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
    write = write_indoor_dataset if a.kind == "indoor" else write_outdoor_dataset
    records = write(a.out, a.split, a.scenes, a.seed, overwrite=a.force)
    report = dataset_report(a.out, a.kind, a.split, records, a.scenes)
    save_overlap_histogram_png(report.overlaps, report.overlap_png, report.title)
    save_pair_grid_png(report.samples_png, report.samples)
    logging.info(report.summary)
