"""In-memory changes of real pairs through ``pcreg.register``: the same answer, mapped back
into the original frame, or a clear refusal (never a different answer with a success).

The reference of every case is the estimate on the unchanged pair (not the ground truth):
the test is whether the pipeline's answer depends on things that should not matter (a
global offset, the units, the point order, duplicates, the dtype, a few far outliers).
"""

from __future__ import annotations

import pytest
from metamorphic_support import CHANGES, PAIR_NAMES, check_invariant, transform_gap

pytestmark = pytest.mark.data

#: the cases CI runs: every change of the 3DMatch demo pair, and the georeferenced offset of
#: the KITTI pair (its registrations cost ~13 s each on 2 cores); the rest are slow
DEFAULT = {("3dmatch-demo", change) for change in CHANGES} | {("kitti-94-95", "offset-4.2e6m")}

CASES = [
    pytest.param(
        name,
        change,
        id=f"{name}-{change}",
        marks=() if (name, change) in DEFAULT else pytest.mark.slow,
    )
    for name in PAIR_NAMES
    for change in CHANGES
]

#: the benchmarks' success thresholds (RRE deg, RTE m): 3DMatch 15 deg / 30 cm, KITTI 5 deg / 2 m
SUCCESS = {"3dmatch-demo": (15.0, 0.3), "kitti-94-95": (5.0, 2.0), "3dmatch-regtr-5-0": (15.0, 0.3)}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=() if n != "3dmatch-regtr-5-0" else pytest.mark.slow)
        for n in PAIR_NAMES
    ],
)
def test_unchanged_pair_registers(api_run, pair, name):
    """The reference itself: registered, and a success by the benchmark's thresholds (else
    the invariance below would compare against a meaningless estimate)."""
    outcome = api_run(name)
    assert outcome.status == "registered", outcome.describe()
    deg, metres = transform_gap(outcome.transform, pair(name).gt)
    max_deg, max_m = SUCCESS[name]
    assert deg < max_deg and metres < max_m, (deg, metres)


@pytest.mark.parametrize(("name", "change"), CASES)
def test_change_gives_the_same_answer_or_a_refusal(api_run, name, change):
    c = CHANGES[change]
    check_invariant(
        api_run(name, change),
        api_run(name),
        c.map_back,
        refusal_ok=c.refusal_ok,
        what=f"{name}, {change}",
        names=("src", "ref"),
    )
