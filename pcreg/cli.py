"""The ``pcreg`` command line (argparse; heavy imports happen inside the subcommands).

Each subcommand lives in :mod:`pcreg.commands` (``add_parser(sub)`` wires its arguments, its
handler is a thin wrapper over a library function); this module builds the parser, sets up
logging and maps errors to exit codes.

Exit codes: 0 ok, 2 bad input (the message names the file and the problem), 1 internal error.
"""

from __future__ import annotations

import argparse
import logging
import sys

__all__ = ["build_parser", "main"]

logger = logging.getLogger("pcreg")


def build_parser() -> argparse.ArgumentParser:
    from pcreg.commands import batch, benchmark, demo, evaluate, odometry, register, train, view

    parser = argparse.ArgumentParser(prog="pcreg", description="3-D point-cloud registration.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    # the order of the help listing: benchmark, register, batch, manifest, odometry, view,
    # demo, vit, detr, train, evaluate, evaluate-log
    for command in (benchmark, register, batch, odometry, view, demo, train, evaluate):
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pcreg`` console script. Returns the process exit code."""
    from pcreg.errors import InputError

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # recorded in benchmark tables
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # The command line keeps freed memory in the heap (pcreg/engine/heap.py: large tensors are
    # not page-faulted anew each registration); a library caller opts in itself.
    # PCREG_RETAIN_HEAP=0 leaves malloc alone.
    from pcreg.engine.heap import retain_freed_memory

    retain_freed_memory()
    try:
        return int(args.func(args))
    except InputError as err:
        sys.stderr.write(f"pcreg: error: {err}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("pcreg: interrupted\n")
        return 130
    except Exception as err:  # internal error: one line, plus the traceback with -v
        logger.debug("internal error", exc_info=True)
        sys.stderr.write(f"pcreg: internal error: {type(err).__name__}: {err}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
