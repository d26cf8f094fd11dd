"""Thin wrapper: ``python tools/benchmark.py [--quick]`` == ``pcreg benchmark [--quick]``."""

import sys

from pcreg.cli import main

if __name__ == "__main__":
    sys.exit(main(["benchmark", *sys.argv[1:]]))
