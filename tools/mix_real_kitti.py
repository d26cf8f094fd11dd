"""A KITTI-layout training root = synthetic outdoor pairs + the real KITTI pairs of train_data.

    python tools/mix_real_kitti.py SYNTHETIC_ROOT \
        ../shared/train_data/kitti_seq00-07_semantickitti_mini OUT --repeat 2

The validation split is the synthetic one, unchanged. See :mod:`pcreg.data.real_kitti`.
"""

import argparse
import logging
import sys
from pathlib import Path

from pcreg.data.real_kitti import write_mixed_outdoor_root
from pcreg.errors import InputError

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("synthetic", type=Path)
    p.add_argument("real", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--repeat", type=int, default=2, help="times each real pair is listed")
    p.add_argument("--force", action="store_true", help="replace existing metadata")
    a = p.parse_args()
    try:
        write_mixed_outdoor_root(a.synthetic, a.real, a.out, repeat=a.repeat, overwrite=a.force)
    except InputError as err:
        sys.stderr.write(f"mix_real_kitti: error: {err}\n")
        sys.exit(2)
