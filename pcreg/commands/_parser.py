"""The command line's argument parser class: argparse with its errors on one line."""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["OneLineParser"]


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line (the command line's contract for bad input: one
    line naming the argument and the problem, exit 2), pointing at ``--help`` where argparse
    prints the whole usage block first. Subcommand parsers are of this class too:
    ``add_subparsers`` makes its parsers of the parent's class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")
