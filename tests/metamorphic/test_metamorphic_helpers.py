"""The suite can fail: the equivalence check and the map-backs catch a wrong answer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from metamorphic_support import (
    CHANGES,
    ROTATION_TOL_DEG,
    TRANSLATION_TOL_M,
    Outcome,
    assert_equivalent,
    check_invariant,
    transform_gap,
    translation,
    truncated_prefix_is_valid,
)


def _rotation_z(deg: float) -> np.ndarray:
    a = math.radians(deg)
    out = np.eye(4)
    out[:2, :2] = [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]
    return out


T = translation(np.array([0.3, -0.1, 0.25])) @ _rotation_z(17.0)


def test_gap_and_tolerances():
    assert transform_gap(T, T) == pytest.approx((0.0, 0.0), abs=1e-6)
    assert transform_gap(T, _rotation_z(0.05) @ T)[0] == pytest.approx(0.05, rel=1e-6)
    assert_equivalent(translation([0.009, 0, 0]) @ T, T, "0.9 cm")
    assert_equivalent(_rotation_z(0.09) @ T, T, "0.09 deg")
    with pytest.raises(AssertionError, match="different answer"):
        assert_equivalent(translation([0, 0.011, 0]) @ T, T, "1.1 cm")
    with pytest.raises(AssertionError, match="different answer"):
        # about the translation's own origin, so only the angle moves
        moved = T.copy()
        moved[:3, :3] = _rotation_z(0.11)[:3, :3] @ T[:3, :3]
        assert_equivalent(moved, T, "0.11 deg")
    assert TRANSLATION_TOL_M == 0.01 and ROTATION_TOL_DEG == 0.1


@pytest.mark.parametrize("change", ["offset-1e3m", "offset-4.2e6m", "units-x1000", "units-x0.01"])
def test_map_backs_undo_their_change_and_a_wrong_one_fails(change):
    """What a correct pipeline returns on the changed pair maps back to T; skipping the map
    back (or inverting it) is caught."""
    c = CHANGES[change]
    src = np.random.default_rng(0).normal(size=(50, 3))
    ref = src @ T[:3, :3].T + T[:3, 3]
    src2, ref2 = c.apply(src, ref)
    # the exact transform between the changed clouds, by least squares (Kabsch)
    a, b = src2 - src2.mean(0), ref2 - ref2.mean(0)
    u, _, vt = np.linalg.svd(b.T @ a)
    rot = u @ np.diag([1, 1, np.linalg.det(u @ vt)]) @ vt
    changed = np.eye(4)
    changed[:3, :3] = rot
    changed[:3, 3] = ref2.mean(0) - rot @ src2.mean(0)
    reference = Outcome("registered", T)
    check_invariant(
        Outcome("registered", changed), reference, c.map_back, refusal_ok=True, what=change
    )
    with pytest.raises(AssertionError, match="different answer"):
        check_invariant(
            Outcome("registered", changed), reference, lambda t: t, refusal_ok=True, what=change
        )


def test_outcomes_other_than_the_same_answer_or_a_clear_refusal_fail():
    reference = Outcome("registered", T)
    ok = {"refusal_ok": True, "what": "case"}
    check_invariant(Outcome("refused", message="src: too few points"), reference, np.copy, **ok)
    with pytest.raises(AssertionError, match="as valid as the original"):
        check_invariant(
            Outcome("refused", message="src: x"), reference, np.copy, refusal_ok=False, what="c"
        )
    with pytest.raises(AssertionError, match="not one line"):
        check_invariant(Outcome("refused", message="a\nb"), reference, np.copy, **ok)
    with pytest.raises(AssertionError, match="neither the same answer nor a refusal"):
        check_invariant(Outcome("not registered", T, "confidence 0"), reference, np.copy, **ok)
    with pytest.raises(AssertionError, match="crashed"):
        check_invariant(Outcome("crashed", message="exit 1"), reference, np.copy, **ok)


def test_which_truncated_prefixes_are_valid_files():
    assert truncated_prefix_is_valid("bin", bytes(32))
    assert not truncated_prefix_is_valid("bin", bytes(36))
    assert truncated_prefix_is_valid("xyz", b"1 2 3\n4 5 6\n")
    assert truncated_prefix_is_valid("xyz", b"1 2 3\n4 5 6.2")  # inside the last number
    assert not truncated_prefix_is_valid("xyz", b"1 2 3\n4 5 ")
    assert not truncated_prefix_is_valid("csv", b"x,y,z\n1,2,3\n4,5,-")
    assert not truncated_prefix_is_valid("csv", b"x,y,z\n1,2,3\n4,5,6e")
    for fmt in ("ply-ascii", "ply-binary", "pcd-ascii", "npy", "npz", "las", "laz"):
        assert not truncated_prefix_is_valid(fmt, b"anything\n")


@pytest.mark.data
def test_a_wrong_map_back_fails_on_a_real_result(api_run):
    """On the real demo pair moved by 1 km: the estimate taken as it comes (not mapped back)
    is ~1000 x the rotation's offset away, and the check says so."""
    change = CHANGES["offset-1e3m"]
    outcome, reference = api_run("3dmatch-demo", "offset-1e3m"), api_run("3dmatch-demo")
    assert outcome.status == "registered", outcome.describe()
    check_invariant(outcome, reference, change.map_back, refusal_ok=False, what="right map back")
    with pytest.raises(AssertionError, match="different answer"):
        check_invariant(outcome, reference, lambda t: t, refusal_ok=False, what="no map back")
    with pytest.raises(AssertionError, match="different answer"):
        wrong = CHANGES["offset-1e6m"].map_back  # the map back of another offset
        check_invariant(outcome, reference, wrong, refusal_ok=False, what="wrong map back")
