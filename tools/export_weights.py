"""Turn a training checkpoint into shipped package weights (float16 + model configuration).

python tools/export_weights.py outputs/train/indoor/best.pt indoor      # -> pcreg/weights/indoor.pt
python tools/export_weights.py RUN/best.pt my_model.pt --float32
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pcreg.errors import InputError
from pcreg.registration.loading import SHIPPED_MODELS, WEIGHTS_DIR, export_weights


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="pcreg train last.pt / best.pt")
    parser.add_argument("out", help=f"{' | '.join(SHIPPED_MODELS)} (into pcreg/weights/) or a path")
    parser.add_argument("--float32", action="store_true", help="keep float32 (default float16)")
    parser.add_argument("--force", action="store_true", help="replace an existing file")
    args = parser.parse_args(argv)
    out = WEIGHTS_DIR / f"{args.out}.pt" if args.out in SHIPPED_MODELS else Path(args.out)
    try:
        path = export_weights(args.checkpoint, out, half=not args.float32, overwrite=args.force)
    except InputError as err:
        sys.stderr.write(f"export_weights: error: {err}\n")
        return 2
    sys.stdout.write(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
