"""Print the per-stage neighbor limits of a dataset (3DMatch layout or KITTI layout).

python tools/calibrate_neighbors.py threedmatch ROOT --split train --voxel 0.025 --stages 4
python tools/calibrate_neighbors.py kitti ROOT --split train --voxel 0.3 --stages 5 --radius 4.25
"""

import argparse

from pcreg.data.calibration import calibrate_dataset
from pcreg.data.kitti import KittiPairs
from pcreg.data.threedmatch import ThreeDMatchPairs

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("layout", choices=["threedmatch", "kitti"])
    p.add_argument("root")
    p.add_argument("--split", default="train")
    p.add_argument("--voxel", type=float, required=True, help="stage-0 voxel size, metres")
    p.add_argument("--stages", type=int, required=True)
    p.add_argument("--radius", type=float, default=2.5, help="search radius in voxel sizes")
    p.add_argument("--samples", type=int, default=50)
    a = p.parse_args()
    ds = (
        ThreeDMatchPairs(a.root, a.split)
        if a.layout == "threedmatch"
        else KittiPairs(a.root, a.split, refine=False)
    )
    limits = calibrate_dataset(
        ds,
        voxel_size=a.voxel,
        num_stages=a.stages,
        search_radius=a.radius * a.voxel,
        num_samples=a.samples,
    )
    print("neighbor_limits:", limits)
