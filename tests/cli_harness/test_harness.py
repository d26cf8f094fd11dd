"""The hostile CLI harness of the "never silently wrong" issue: every case runs ``pcreg`` in
a fresh process and checks the exit-code contract (see ``harness_run.py``): 0 with a correct
answer, 2 with one ``pcreg: error:`` line naming the problem, 3 with one ``not registered``
line and nothing written; never 1, a traceback, a hang or more than 4 GiB.

The ``fast`` cases (one or two per class) run in the default suite; the rest are ``slow``
(``make test-all``, or ``pytest -m slow tests/cli_harness``). ``PCREG_HARNESS_LOG=FILE``
appends one JSON line per case (``summarize.py`` groups the failures).
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from harness_cases import CASES, CLASSES
from harness_run import describe, judge, run, snapshot_all

pytestmark = pytest.mark.data


def _param(c):
    marks = [] if c.fast else [pytest.mark.slow]
    return pytest.param(c, id=c.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_cli_contract(case, harness_workspace, tmp_path):
    if case.nonroot and os.geteuid() == 0:
        pytest.skip("root reads and writes any file: the permission case means nothing")
    inv = case.build(harness_workspace, tmp_path)
    if inv.cwd is None:
        inv.cwd = tmp_path  # relative outputs land here, never in the repository
    before = snapshot_all(inv)
    res = run(inv, tmp_path)
    problems = judge(inv, res, before)
    _log(case, inv, res, problems)
    assert not problems, describe(inv, res, problems)


def _log(case, inv, res, problems) -> None:
    path = os.environ.get("PCREG_HARNESS_LOG")
    if not path:
        return
    row = {
        "id": case.id,
        "class": case.klass,
        "fast": case.fast,
        "command": inv.shown(),
        "rc": res.rc,
        "wall_s": round(res.wall_s, 2),
        "maxrss_mib": round(res.maxrss_kib / 1024, 1),
        "problems": problems,
        "stderr": res.stderr[-2000:],
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def test_case_inventory():
    """At least 400 cases, unique ids, every class covered with a fast representative."""
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    assert len(CASES) >= 400, len(CASES)
    per_class = Counter(c.klass for c in CASES)
    fast = Counter(c.klass for c in CASES if c.fast)
    for klass in CLASSES:
        assert per_class[klass] >= 10, (klass, per_class[klass])
        assert fast[klass] >= 1, klass
