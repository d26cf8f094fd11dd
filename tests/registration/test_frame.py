"""The working frame: a pair shifted by a georeferenced offset gives the same transform, to
1e-6, once mapped back (float64 centring before any float32 cast)."""

from __future__ import annotations

import numpy as np
import pytest

from pcreg.registration.frames import to_user_frame, working_origin
from pcreg.registration.result import RegistrationResult


def _shift_back(transform: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``Tr(-d) @ T @ Tr(d)``: a transform estimated on clouds shifted by ``d`` in the
    unshifted frame."""
    out = transform.copy()
    out[:3, 3] += out[:3, :3] @ d - d
    return out


def test_to_user_frame_conjugates(rng):
    from scipy.spatial.transform import Rotation

    t = np.eye(4)
    t[:3, :3] = Rotation.random(random_state=1).as_matrix()
    t[:3, 3] = [1.0, -2.0, 0.5]
    pts = rng.normal(size=(10, 3))
    o_src, o_ref = np.array([5e5, 4.2e6, 30.0]), np.array([-3.0, 7.0, 1e3])
    result = RegistrationResult(t.copy(), pts, pts @ t[:3, :3].T + t[:3, 3], np.ones(10), "m",
                                "m", "indoor", False, 0.05)  # fmt: skip
    to_user_frame(result, np.stack([o_src, o_ref]))
    moved = (pts + o_src) @ result.transform[:3, :3].T + result.transform[:3, 3]
    np.testing.assert_allclose(moved, (pts @ t[:3, :3].T + t[:3, 3]) + o_ref, atol=1e-6)
    np.testing.assert_allclose(result.src_corr_points, pts + o_src)
    np.testing.assert_allclose(result.ref_corr_points, pts @ t[:3, :3].T + t[:3, 3] + o_ref)


def test_only_the_reference_georeferenced(shared_data):
    """A source at the origin and its reference at UTM coordinates: the transform carries the
    offset (each cloud is centred on its own median before the float32 cast)."""
    from pcreg.api import pipeline

    demo = shared_data / "geotransformer_repo" / "demo"
    src, ref = np.load(demo / "src.npy"), np.load(demo / "ref.npy")
    pipe = pipeline()
    base = pipe(src, ref).transform
    d = np.array([5e5, 4.2e6, 12.0])
    moved = pipe(src, ref + d).transform
    expected = base.copy()
    expected[:3, 3] += d
    np.testing.assert_allclose(moved, expected, atol=1e-6)


def test_working_origin_moves_with_the_cloud(rng):
    pts = rng.normal(size=(1001, 3))
    d = np.array([5e5, 4.2e6, 1e3])
    np.testing.assert_allclose(working_origin(pts + d), working_origin(pts) + d, atol=1e-8)


@pytest.mark.parametrize("offset", [1e3, 1e6, 4.2e6, 1e9])
def test_georeferenced_pair_registers_as_at_the_origin(shared_data, offset):
    from pcreg.api import pipeline

    demo = shared_data / "geotransformer_repo" / "demo"
    src, ref = np.load(demo / "src.npy"), np.load(demo / "ref.npy")
    pipe = pipeline()
    base = pipe(src, ref).transform
    d = np.array([offset, -0.7 * offset, 0.1 * offset])
    shifted = pipe(src + d, ref + d).transform
    # float64 rounding of the map back: ~1e-15 of the offset (1.3e-6 at 1e9 m)
    np.testing.assert_allclose(_shift_back(shifted, d), base, atol=max(1e-6, 2e-15 * offset))


def test_manhattan_frame_does_not_depend_on_point_order(rng):
    from pcreg.geometry.manhattan import estimate_manhattan_frame

    floor = np.c_[rng.uniform(0, 4, (4000, 2)), np.zeros(4000)]
    wall = np.c_[rng.uniform(0, 4, 3000), np.zeros(3000), rng.uniform(0, 2.5, 3000)]
    side = np.c_[np.zeros(3000), rng.uniform(0, 4, 3000), rng.uniform(0, 2.5, 3000)]
    room = np.vstack([floor, wall, side]) + rng.normal(0, 0.005, (10000, 3))
    a = estimate_manhattan_frame(room, candidates=50)
    b = estimate_manhattan_frame(room[rng.permutation(len(room))], candidates=50)
    np.testing.assert_allclose(a.points, b.points, atol=1e-9)  # voxel means: summation order
    np.testing.assert_allclose(a.rotation, b.rotation, atol=1e-9)
