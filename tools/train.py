"""Thin wrapper: ``python tools/train.py [overrides]`` == ``pcreg train [overrides]``."""

import sys

from pcreg.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
