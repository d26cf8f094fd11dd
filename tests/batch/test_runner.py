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


@pytest.mark.parametrize(
    ("nodes", "threads"),
    [
        (
            [
                {"NodeID": "other", "Resources": {"CPU": 8.0}},
                {"NodeID": "me", "Resources": {"CPU": 2.0}},
            ],
            4,
        ),
        ([{"NodeID": "me", "Resources": {"CPU": 8.0}}], 1),
        ([{"NodeID": "other", "Resources": {"CPU": 1.0}}], 1),  # this node not listed
        ([{"NodeID": "me", "Resources": {}}], 1),  # no CPUs listed
    ],
)
def test_a_worker_reads_its_own_node(monkeypatch, nodes, threads):
    """The share is this worker's node's (8 cores here); a node Ray does not list, or lists
    without CPUs, gets one thread, which never oversubscribes it."""
    import ray

    from pcreg.batch import runner
    from pcreg.engine import threads as engine_threads

    class Context:
        def get_node_id(self) -> str:
            return "me"

    monkeypatch.setattr(ray, "get_runtime_context", Context)
    monkeypatch.setattr(ray, "nodes", lambda: nodes)
    monkeypatch.setattr(engine_threads, "usable_cores", lambda: 8)
    assert runner._node_threads() == threads
