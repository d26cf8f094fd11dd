"""The Ray runner's choices that need no cluster: threads per task, the order of pairs."""

from __future__ import annotations

import pytest

from pcreg.batch.runner import largest_first, threads_per_cpu


@pytest.mark.parametrize(
    ("cores", "cpus", "threads"),
    [(2, 2, 1), (2, 1, 2), (16, 4, 4), (16, 3, 5), (2, 4, 1), (8, 0.5, 8), (1, 1, 1)],
)
def test_a_task_gets_its_share_of_the_node_cores(cores, cpus, threads):
    assert threads_per_cpu(cores, cpus) == threads


def test_pairs_go_largest_first_ties_in_input_order():
    assert largest_first([3, 9, 3, 12, 9]) == [3, 1, 4, 0, 2]
