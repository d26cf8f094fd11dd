"""The command line's argument parser class: argparse with its errors on one line."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

__all__ = ["ArgumentExit", "OneLineParser"]


class ArgumentExit(SystemExit):
    """argparse's exit 2 for a refused argument, with its one ``line`` (already on stderr):
    the command line repeats it as a JSON object where ``--json`` was asked for."""

    def __init__(self, line: str) -> None:
        super().__init__(2)
        self.line = line


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line (the command line's contract for bad input: one
    line naming the argument and the problem, exit 2), pointing at ``--help`` where argparse
    prints the whole usage block first. Subcommand parsers are of this class too:
    ``add_subparsers`` makes its parsers of the parent's class.

    Options are never abbreviated (``allow_abbrev=False``): argparse took ``--voxel 0.05`` as
    ``--voxel-size 0.05`` and ``--out`` as any one option it began, so a script written against
    one release could change meaning when a later one adds an option with the same start."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        line = f"{self.prog}: error: {message} (see `{self.prog} --help`)"
        self._print_message(line + "\n", sys.stderr)
        raise ArgumentExit(line)
