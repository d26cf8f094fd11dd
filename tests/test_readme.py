"""The README and docs/*.md as tests: every ``bash`` and ``python`` block runs, and every output
block marked ``<!-- expected-output -->`` matches what its command prints.

How a block runs: in one scratch folder per test session, shared by the blocks in document
order (a later block may read what an earlier one wrote, e.g. the quick start's ``T.txt``),
where the Makefile's ``demo`` recipe has already written ``demo_out/`` and ``../shared``
links to the real data (``$PCREG_SHARED_DATA``, default ``../shared/data`` beside the
checkout). A ``pcreg`` shim on ``PATH`` runs ``python -m pcreg`` with this interpreter, so
the blocks use this checkout whether or not the console script is installed. ``bash`` blocks
run under ``bash -e -o pipefail``; ``python`` blocks in a fresh interpreter.

Marks, as HTML comments on the lines just before a block (the syntax pytest-codeblocks uses):
``<!-- pytest.mark.skip(reason="...") -->`` (a reason is required), ``<!-- pytest.mark.slow
-->``, ``<!-- pytest.mark.ray -->``; a block that names ``../shared/`` is marked ``data`` and
skipped when the data is absent. ``<!-- expected-output -->`` before a ``text`` block makes it
the expected stdout of the block before it: its lines must appear in the output in order,
numbers excepted (they are compared as ``#``: timings and last digits vary), ``...`` lines
standing for anything.

Why not pytest-codeblocks 0.18 (evaluated for issue #43): it runs every block in pytest's own
working directory (the blocks would write ``T.txt``, ``pair.png``... into the checkout), has
no fixtures to prepare ``demo_out/`` and ``../shared`` first or to put ``pcreg`` on ``PATH``,
executes Python blocks inside the pytest process (the blocks' torch, Ray and thread settings
would leak into the other tests), compares expected output byte for byte (timings differ on
every run), and collects Markdown only with ``--codeblocks`` and the files named on the
command line, so ``make test`` and ``pytest tests/test_readme.py`` would not run it as set up.
This module keeps its marker syntax.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# as tests/conftest.py defines them (not imported: under the whole suite the module named
# ``conftest`` may be another directory's)
REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PCREG_SHARED_DATA", REPO.parent / "shared" / "data"))

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUNNABLE = {"bash": "bash", "sh": "bash", "python": "python"}
MARKS = {"skip", "slow", "ray"}
BLOCK_TIMEOUT_S = 600

_FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
_MARK = re.compile(r"^<!--\s*pytest\.mark\.(\w+)(?:\((.*)\))?\s*-->$")
_EXPECTED = re.compile(r"^<!--\s*expected-output\s*-->$")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marks: dict[str, str | None] = field(default_factory=dict)  # name -> reason (skip)
    expected: str | None = None
    expects_output: bool = False  # an `<!-- expected-output -->` text block

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def needs_shared(self) -> bool:
        return "../shared/" in self.code


def _mark(line: str, where: str) -> tuple[str, str | None]:
    m = _MARK.match(line)
    if m is None:
        raise ValueError(f"{where}: not a mark: {line}")
    name, args = m.group(1), m.group(2)
    if name not in MARKS:
        raise ValueError(f"{where}: unknown mark {name!r} (known: {', '.join(sorted(MARKS))})")
    reason = None
    if args:
        r = re.fullmatch(r'\s*reason\s*=\s*"([^"]*)"\s*', args)
        if r is None:
            raise ValueError(f'{where}: write the mark\'s argument as reason="..."')
        reason = r.group(1).strip()
    return name, reason


def parse(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with the marks of the comments just before each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    pending: list[str] = []  # comment lines since the last text
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        fence = _FENCE.match(lines[i])
        if fence:
            start = i
            i += 1
            body = []
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise ValueError(f"{path}:{start + 1}: unclosed code block")
            block = Block(path, start + 1, fence.group(1).lower(), "\n".join(body) + "\n")
            for comment in pending:
                where = f"{path.name}:{start + 1}"
                if _EXPECTED.match(comment):
                    block.expects_output = True
                else:
                    name, reason = _mark(comment, where)
                    block.marks[name] = reason
            pending = []
            blocks.append(block)
        elif line.startswith("<!--") and ("pytest.mark" in line or "expected-output" in line):
            pending.append(line)
        elif line:
            pending = []
        i += 1
    # attach each expected output to the block before it
    for k, block in enumerate(blocks):
        if block.expects_output:
            if k == 0 or blocks[k - 1].lang not in RUNNABLE or block.lang != "text":
                raise ValueError(f"{block.id}: an expected-output text block follows no code block")
            blocks[k - 1].expected = block.code
    return blocks


ALL_BLOCKS = [b for path in DOCS for b in parse(path)]
RUN_BLOCKS = [b for b in ALL_BLOCKS if b.lang in RUNNABLE]


def _params():
    for block in RUN_BLOCKS:
        marks = []
        if "skip" in block.marks:
            marks.append(pytest.mark.skip(reason=f"{block.id}: {block.marks['skip']}"))
        if "slow" in block.marks:
            marks.append(pytest.mark.slow)
        if "ray" in block.marks:
            marks.append(pytest.mark.ray)
        if block.needs_shared:
            marks.append(pytest.mark.data)
        yield pytest.param(block, id=block.id, marks=marks)


def _demo_recipe() -> str:
    """The command of the Makefile's ``demo`` target, with ``pcreg`` for the venv's path."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8").splitlines()
    start = next(k for k, ln in enumerate(makefile) if re.match(r"^demo\s*:", ln))
    recipe = [ln.strip() for ln in makefile[start + 1 :] if ln.startswith("\t")][:1]
    assert recipe, "the Makefile's demo target has no recipe"
    return recipe[0].replace("$(VENV)/bin/pcreg", "pcreg")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """``(folder, environment)`` the blocks run in: ``demo_out/`` written by the Makefile's
    demo recipe, ``../shared/{data,train_data}`` linked where present, ``pcreg`` on PATH."""
    root = tmp_path_factory.mktemp("readme")
    work, bin_dir, shared = root / "work", root / "bin", root / "shared"
    for folder in (work, bin_dir, shared):
        folder.mkdir()
    shim = bin_dir / "pcreg"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m pcreg "$@"\n')
    shim.chmod(0o755)
    if SHARED_DATA.is_dir():
        (shared / "data").symlink_to(SHARED_DATA.resolve())
        train = SHARED_DATA.parent / "train_data"
        if train.is_dir():
            (shared / "train_data").symlink_to(train.resolve())
    env = dict(os.environ)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        PCREG_NO_SERVER="1",  # a developer's `pcreg serve` must not answer (conftest too)
        MPLBACKEND="Agg",
        PYTHONUNBUFFERED="1",
    )
    done = subprocess.run(
        ["bash", "-e", "-c", _demo_recipe()], cwd=work, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"make demo's recipe failed:\n{done.stdout}\n{done.stderr}"
    return work, env


def _normalise(text: str) -> list[str]:
    return [" ".join(_NUMBER.sub("#", ln).split()) for ln in text.splitlines() if ln.strip()]


def check_output(expected: str, actual: str) -> str | None:
    """None when every expected line (numbers as ``#``; ``...`` lines skipped) appears in the
    actual output in order; else the first expected line not found."""
    lines = iter(_normalise(actual))
    for want in _normalise(expected):
        if want == "...":
            continue
        if not any(got == want for got in lines):
            return want
    return None


#: a shell block that writes files (an output option or a redirect): it must also work when
#: run again over its own outputs (issue #43: every documented path works twice)
_WRITES = re.compile(r"--(?:out|render|report)\b|>")


@pytest.mark.parametrize("block", list(_params()))
def test_block_runs(block: Block, workdir) -> None:
    work, env = workdir
    if block.needs_shared and not (work.parent / "shared" / "data").is_dir():
        pytest.skip(f"needs ../shared/data (not found at {SHARED_DATA})")
    if RUNNABLE[block.lang] == "bash":
        argv = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    else:
        argv = [sys.executable, "-c", block.code]
    runs = 2 if RUNNABLE[block.lang] == "bash" and _WRITES.search(block.code) else 1
    for run in range(runs):
        done = subprocess.run(
            argv, cwd=work, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
        )
        report = (
            f"{block.id} ({block.lang}) exited {done.returncode}"
            f"{' when run again' if run else ''}\n--- block\n{block.code}"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        )
        assert done.returncode == 0, report
    if block.expected is not None:
        missing = check_output(block.expected, done.stdout)
        assert missing is None, f"expected output line not printed: {missing!r}\n{report}"


def test_every_block_is_marked_right() -> None:
    """Skips say why; commands sit in runnable blocks (a bare fence starting with a command
    would escape this test); output blocks are ``text``."""
    for block in ALL_BLOCKS:
        if "skip" in block.marks:
            assert block.marks["skip"], f"{block.id}: a skip needs a reason"
        if block.marks:
            assert block.lang in RUNNABLE, f"{block.id}: marks on a {block.lang!r} block"
        if not block.lang:
            first = block.code.lstrip().split(maxsplit=1)[:1]
            assert first not in (["pcreg"], ["make"], ["python"], ["pip"]), (
                f"{block.id}: a command in a block without a language is never run: "
                "write ```bash (or ```text for usage and output)"
            )


def test_check_output_compares_words_not_numbers() -> None:
    assert check_output("a 1.5 s\n...\nc 3", "a 0.25 s\nb\nc 4\n") is None
    assert check_output("registered: yes", "registered: NO (...)") == "registered: yes"
    assert check_output("x\ny", "y\nx") == "y"  # in order


_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file."""
    out = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            title = re.sub(r"[^\w\- ]", "", title)
            out.add(title.replace(" ", "-"))
    return out


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_links_resolve(path: Path) -> None:
    """Every relative link and image of the page names a file in the repository, and every
    ``#anchor`` a heading of its page (text moved into docs/ changes the paths)."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    for target in _LINK.findall(text):
        if re.match(r"^[a-z]+://", target) or target.startswith("mailto:"):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        assert dest.exists(), f"{path.name}: link to {target} names no file"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{path.name}: no heading #{anchor} in {dest.name}"


def test_demo_outputs_are_what_the_readme_names(workdir) -> None:
    """The files the README says `make demo` writes are what `pcreg demo` writes."""
    from pcreg.demo import OUTPUTS

    work, _ = workdir
    text = (REPO / "README.md").read_text(encoding="utf-8")
    intro = text[: text.index("## Quick start")]
    named = set(re.findall(r"`(?:demo_out/)?([\w.]+\.(?:ply|txt|json|png|html))`", intro))
    assert named == set(OUTPUTS), f"README names {sorted(named)}, pcreg demo writes {OUTPUTS}"
    for name in OUTPUTS:
        assert (work / "demo_out" / name).is_file(), name


def test_cli_reference_names_real_options() -> None:
    """Every ``--option`` in docs/cli.md's usage block exists on its subcommand."""
    from pcreg.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    usage = next(b for b in parse(REPO / "docs" / "cli.md") if b.lang == "text")
    command = None
    checked = 0
    for line in usage.code.splitlines():
        words = line.split()
        if words and words[0] == "pcreg":
            command = words[1]
        assert command in sub.choices, f"docs/cli.md names an unknown subcommand {command!r}"
        options = {o for a in sub.choices[command]._actions for o in a.option_strings}
        if options <= {"-h", "--help"}:  # Hydra overrides or a nested parser: not argparse's
            continue
        for opt in re.findall(r"(?<![\w-])--[a-z][\w-]*", line.split("#")[0]):
            assert opt in options, f"docs/cli.md: pcreg {command} has no {opt}"
            checked += 1
    assert checked > 40
