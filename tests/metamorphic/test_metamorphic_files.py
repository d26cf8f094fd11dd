"""Every supported file format through the command line (``pcreg register SRC REF --json``):
the same answer as the ``.npy`` files of the same clouds; and every format truncated at 10,
50 and 90 % of its bytes: refused (exit 2, one line naming the file), except where the prefix
is itself a well-formed file no reader can tell from a complete one (KITTI ``.bin`` cut at a
record boundary, text cut at a line boundary or inside the last number), which may give any
orderly outcome (exit 0, 2 or 3) and is not claimed equivalent.

The files are written by third-party writers (Open3D for PLY/PCD, numpy, laspy), ASCII and
binary. Float32 formats (``.pcd`` from Open3D, ``.bin``) and the text/LAS quantisation lose
less than 0.1 mm on these clouds (the real data are float32 values near the origin).
"""

from __future__ import annotations

import pytest
from metamorphic_support import (
    FORMATS,
    assert_clear_refusal,
    check_invariant,
    cli_outcome,
    truncated_prefix_is_valid,
)

pytestmark = pytest.mark.data

#: KITTI scans (120 k points, ~15 s a registration) through every format are slow
PAIRS = {"3dmatch-demo": (), "kitti-94-95": pytest.mark.slow}


def _identity(transform):
    return transform


@pytest.mark.parametrize(
    ("name", "fmt"),
    [pytest.param(n, f, id=f"{n}-{f}", marks=m) for n, m in PAIRS.items() for f in FORMATS],
)
def test_format_gives_the_npy_answer(cli_run, api_run, name, fmt):
    """The same clouds in another format: the same estimate as from ``.npy``; ``.npy`` itself
    against the Python API on the arrays. A valid file is never refused."""
    reference = api_run(name) if fmt == "npy" else cli_run(name, "npy")
    check_invariant(
        cli_run(name, fmt), reference, _identity, refusal_ok=False, what=f"{name} as {fmt}"
    )


TRUNCATIONS = (0.1, 0.5, 0.9)


@pytest.mark.parametrize(
    ("name", "fmt", "share"),
    [
        pytest.param(n, f, s, id=f"{n}-{f}-cut{round(100 * s)}pct", marks=m)
        for n, m in PAIRS.items()
        for f in FORMATS
        for s in TRUNCATIONS
    ],
)
def test_truncated_file_is_refused(written, tmp_path, name, fmt, share):
    src, ref = written(name, fmt)
    data = src.read_bytes()
    cut = data[: int(len(data) * share)]
    path = tmp_path / src.name
    path.write_bytes(cut)
    outcome = cli_outcome(path, ref)
    what = f"{name} {fmt} source cut to {len(cut)} of {len(data)} bytes"
    print(f"{what}: {outcome.describe()}")
    assert outcome.status != "crashed", f"{what}: {outcome.message}"
    if truncated_prefix_is_valid(fmt, cut):
        # a complete file of fewer points: any orderly answer (not compared with anything)
        if outcome.status == "refused":
            assert_clear_refusal(outcome, what)
        return
    assert_clear_refusal(outcome, what, names=(str(path),))
