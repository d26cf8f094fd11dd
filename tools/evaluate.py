"""Thin wrapper: ``python tools/evaluate.py [overrides]`` == ``pcreg evaluate [overrides]``."""

import sys

from pcreg.cli import main

if __name__ == "__main__":
    sys.exit(main(["evaluate", *sys.argv[1:]]))
