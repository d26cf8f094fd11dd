"""The orientation search: sources that apply propose hypotheses, those that do not contribute
nothing, the best-supported estimate wins, and its settings never reload the network."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.registration.loading import load_network
from pcreg.registration.search import (
    Hypotheses,
    IdentityHypotheses,
    OrientationSearch,
    SearchConfig,
)


class _Fixed:
    """A source proposing given rotations of the source (frames: identity)."""

    name = "fixed"

    def __init__(self, rotations):
        self.rotations = np.asarray(rotations)

    def propose(self, src, ref):
        return Hypotheses(
            np.eye(3), np.eye(3), self.rotations, [f"r{i}" for i in range(len(self.rotations))]
        )


class _NotApplicable:
    name = "never"

    def propose(self, src, ref):
        return None


def _yaw(deg: float) -> np.ndarray:
    a = np.radians(deg)
    return np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])


@pytest.fixture(scope="module")
def indoor():
    return load_network("indoor")


def test_the_right_hypothesis_wins_and_comes_back_in_the_input_frame(indoor, room_pair):
    """The source turned by 120 deg of yaw: of the three proposed yaws only the inverse turn
    leaves the network a small rotation; its estimate wins and is expressed for the pair as
    given (it maps the turned source onto the reference)."""
    src, ref, gt = room_pair
    aligned = src.astype(np.float64) @ gt[:3, :3].T + gt[:3, 3]  # on the reference
    turn = _yaw(120.0)
    turned = (aligned @ turn.T).astype(np.float32)
    truth = np.eye(4)
    truth[:3, :3] = turn.T  # ref = aligned = turn^T turned
    search = OrientationSearch(
        indoor.network, [_NotApplicable(), _Fixed([_yaw(0), _yaw(-120), _yaw(120)])]
    )
    found = search(turned, ref)
    assert found.hypothesis == "r1" and found.tried == 3
    r_err = np.degrees(
        np.arccos(
            np.clip((np.trace(found.prediction.transform[:3, :3].T @ truth[:3, :3]) - 1) / 2, -1, 1)
        )
    )
    assert r_err < 5.0
    assert np.linalg.norm(found.prediction.transform[:3, 3] - truth[:3, 3]) < 0.2
    # the support of the winner is the largest of the three
    alone = [
        OrientationSearch(indoor.network, [_Fixed([r])])(turned, ref).support
        for r in (_yaw(0), _yaw(-120), _yaw(120))
    ]
    assert found.support == pytest.approx(max(alone), rel=1e-6) and np.argmax(alone) == 1


def test_a_source_that_does_not_apply_leaves_the_pair_as_given(tiny_checkpoint, room_pair):
    src, ref, _ = room_pair
    net = load_network(tiny_checkpoint).network
    found = OrientationSearch(net, [_NotApplicable()])(src, ref)
    plain = net(src, ref)
    assert found.hypothesis == "identity" and found.tried == 1
    np.testing.assert_allclose(found.prediction.transform, plain.transform, atol=1e-6)
    assert OrientationSearch(net, [IdentityHypotheses()]).plain


def test_manhattan_keep_prunes_hypotheses(indoor, room_pair):
    """``orientation_keep=0`` proposes all 24 cube rotations, 0.7 only the top-ranked few, and
    the search runs the network on as many rotations as its source proposed, the winner one
    of them. (Running all 24 through the network took 42 s of the suite;
    ``tests/test_shipped_indoor.py`` counts the 24 runs of ``orientation_keep=0`` through the
    shipped runtime.)"""
    src, ref, _ = room_pair

    def search(keep: float) -> OrientationSearch:
        return OrientationSearch.from_config(
            indoor.network, SearchConfig("manhattan", orientation_keep=keep)
        )

    every = search(0.0).sources[0].propose(src, ref)
    pruned = search(0.7)
    kept = pruned.sources[0].propose(src, ref)
    assert len(every.rotations) == 24
    assert 1 <= len(kept.rotations) < 24
    found = pruned(src, ref)
    assert found.tried == len(kept.rotations)
    assert found.hypothesis in kept.labels


def test_bad_search_settings_are_refused():
    with pytest.raises(ValueError, match="orientation_search"):
        SearchConfig(orientation_search="gravity")
    with pytest.raises(ValueError, match="between 0 and 1"):
        SearchConfig(orientation_keep=1.5)


def test_changing_a_search_setting_reuses_the_loaded_weights(room_pair, monkeypatch):
    """Two pipelines that differ only in ``orientation_keep`` share one loaded network: the
    loader runs once, and both run on the very same module."""
    import pcreg.api as api
    from pcreg.registration import networks

    calls = []
    real = networks.load_for_registration

    def counting(model, device="cpu"):
        calls.append(model)
        return real(model, device)

    monkeypatch.setattr(networks, "load_for_registration", counting)
    api._cached_network.cache_clear()
    try:
        src, ref, _ = room_pair  # every 4th point: loading is under test, not the search
        src, ref = src[::4], ref[::4]
        a = api.register(src, ref, "indoor", orientation_keep=0.5)
        b = api.register(src, ref, "indoor", orientation_keep=0.7)
        assert calls == ["indoor"]
        assert (
            api.pipeline("indoor", orientation_keep=0.5).loaded() is api.pipeline("indoor").loaded()
        )
        assert a.hypothesis and b.hypothesis  # both searched
    finally:
        api._cached_network.cache_clear()


def test_a_pipeline_reads_its_network_once_for_many_pairs(
    tiny_checkpoint, three_pairs, monkeypatch
):
    from pcreg.registration import loading
    from pcreg.registration.pipeline import Registration

    calls = []
    real = loading.load_network

    def counting(model, device="cpu", neighbor_backend="auto"):
        calls.append(model)
        return real(model, device, neighbor_backend)

    monkeypatch.setattr(loading, "load_network", counting)
    pipe = Registration(str(tiny_checkpoint))
    for src, ref in three_pairs:
        pipe(src, ref)
    assert pipe.loaded() is pipe.loaded()
    assert calls == [str(tiny_checkpoint)]
