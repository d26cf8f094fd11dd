"""Convert an official GeoTransformer release checkpoint to a pcreg checkpoint.

python tools/convert_checkpoint.py geotransformer-3dmatch.pth.tar out.pt --config 3dmatch
"""

import argparse
import sys

from pcreg.engine.checkpoint import save_checkpoint
from pcreg.models.geotransformer import build_geotransformer, kitti_config, threedmatch_config
from pcreg.models.geotransformer.convert import load_upstream_checkpoint

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("upstream")
    p.add_argument("output")
    p.add_argument("--config", choices=["3dmatch", "kitti"], required=True)
    p.add_argument("--force", action="store_true")
    a = p.parse_args()
    cfg = threedmatch_config() if a.config == "3dmatch" else kitti_config()
    model = build_geotransformer(cfg)
    load_upstream_checkpoint(a.upstream, model)
    save_checkpoint(
        a.output,
        "geotransformer",
        model.state_dict(),
        overwrite=a.force,
        config=cfg.__dict__,
        source=a.upstream,
    )
    sys.exit(0)
