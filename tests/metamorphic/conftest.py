"""Session caches of the metamorphic suite: each real pair read once, each registration run
once (the unchanged input's estimate is the reference of every change), each file written
once. The network loads once per session through ``pcreg.register``'s cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from metamorphic_support import (
    CHANGES,
    FORMATS,
    SHARED_DATA,
    Outcome,
    Pair,
    api_outcome,
    cli_outcome,
    load_pair,
    write_cloud,
)


@pytest.fixture(scope="session")
def pair() -> Callable[[str], Pair]:
    """``pair(name)``: the real pair, read once; skips where ../shared/data is absent."""
    cache: dict[str, Pair] = {}

    def get(name: str) -> Pair:
        if not SHARED_DATA.is_dir():
            pytest.skip(f"real data not found at {SHARED_DATA}")
        if name not in cache:
            cache[name] = load_pair(name)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def api_run(pair) -> Callable[[str, str | None], Outcome]:
    """``api_run(pair_name, change_name)``: ``pcreg.register`` on the changed pair (None:
    unchanged), run once per session."""
    cache: dict[tuple[str, str | None], Outcome] = {}

    def get(name: str, change: str | None = None) -> Outcome:
        key = (name, change)
        if key not in cache:
            p = pair(name)
            src, ref = (p.src, p.ref) if change is None else CHANGES[change].apply(p.src, p.ref)
            cache[key] = api_outcome(src, ref)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def written(pair, tmp_path_factory) -> Callable[[str, str], tuple[Path, Path]]:
    """``written(pair_name, fmt)``: the pair's ``(src, ref)`` files in ``fmt``, written once."""
    root = tmp_path_factory.mktemp("metamorphic-files")
    cache: dict[tuple[str, str], tuple[Path, Path]] = {}

    def get(name: str, fmt: str) -> tuple[Path, Path]:
        if (name, fmt) not in cache:
            p = pair(name)
            folder = root / name / fmt
            folder.mkdir(parents=True)
            cache[name, fmt] = (
                write_cloud(folder / f"src{FORMATS[fmt]}", fmt, p.src),
                write_cloud(folder / f"ref{FORMATS[fmt]}", fmt, p.ref),
            )
        return cache[name, fmt]

    return get


@pytest.fixture(scope="session")
def cli_run(written) -> Callable[[str, str], Outcome]:
    """``cli_run(pair_name, fmt)``: ``pcreg register SRC REF --json`` on the pair written as
    ``fmt``, run once per session."""
    cache: dict[tuple[str, str], Outcome] = {}

    def get(name: str, fmt: str) -> Outcome:
        if (name, fmt) not in cache:
            cache[name, fmt] = cli_outcome(*written(name, fmt))
        return cache[name, fmt]

    return get
