"""The JSON-lines records of the benchmark tools that run case by case and resume where they
stopped (``tools/real_classes.py``, ``tools/fresh_rooms.py``, ``tools/whole_rooms.py``), and
the arguments of the tools that run a range of generated rooms."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

__all__ = ["load_records", "room_run"]


def load_records(path: Path) -> list[dict]:
    """The records of a JSON-lines file (none where it does not exist); a line cut short by
    an interrupted run is skipped (its case runs again), and the file is ended with a newline
    so that the next record starts on a line of its own."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    if path.stat().st_size and not path.read_bytes().endswith(b"\n"):
        with path.open("a") as fh:
            fh.write("\n")
    return out


def room_run(
    doc: str, first: int, rooms: int, argv: Sequence[str] | None = None
) -> tuple[argparse.Namespace, list[dict]]:
    """The arguments of a tool that registers rooms ``--first`` to ``--first + --rooms - 1``
    into ``OUT`` (``--table-only``: only the table of what ``OUT`` holds), and the records
    ``OUT`` holds already; a file of another ``--first`` is refused (exit 2). ``doc``: the
    tool's module doc (its first line describes it); ``first``, ``rooms``: the defaults."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--first", type=int, default=first, help="the first room's seed")
    parser.add_argument("--rooms", type=int, default=rooms)
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args(argv)
    done = load_records(args.out)
    firsts = {r.get("first") for r in done}
    if firsts - {args.first}:
        parser.error(f"{args.out} holds cases of --first {sorted(firsts)}, not {args.first}")
    return args, done
