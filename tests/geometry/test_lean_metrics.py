"""The numpy pose errors (``pcreg.geometry.lean_metrics``) are torch's metrics
(``pcreg.geometry.metrics.pose_errors``), to the last bits."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from pcreg.geometry.lean_metrics import pose_errors_np
from pcreg.geometry.metrics import pose_errors


@pytest.mark.parametrize("deg", [0.0, 1e-6, 0.3, 45.0, 179.9, 180.0])
def test_the_numpy_errors_are_the_metrics(deg, rng):
    axis = rng.normal(size=3)
    gt = np.eye(4)
    gt[:3, :3] = Rotation.random(random_state=int(rng.integers(1 << 30))).as_matrix()
    gt[:3, 3] = rng.normal(size=3) * 5
    turn = np.eye(4)
    turn[:3, :3] = Rotation.from_rotvec(np.radians(deg) * axis / np.linalg.norm(axis)).as_matrix()
    turn[:3, 3] = rng.normal(size=3)
    est = turn @ gt
    points = rng.normal(size=(500, 3)) * 3
    ours = pose_errors_np(est, gt, points)
    theirs = pose_errors(est, gt, points)
    assert ours.keys() == theirs.keys() == {"rre_deg", "rte_m", "rmse_m"}
    for key in ours:
        assert ours[key] == pytest.approx(theirs[key], rel=1e-12, abs=1e-12), key
    assert ours["rre_deg"] == pytest.approx(deg, abs=1e-6)
    assert pose_errors_np(est, gt).keys() == {"rre_deg", "rte_m"}


def test_a_truth_slightly_off_orthonormal_gives_no_nan():
    """3DMatch's published poses have det 0.9993-1.0006."""
    gt = np.eye(4)
    gt[:3, :3] *= 1.0006
    assert np.isfinite(pose_errors_np(np.eye(4), gt)["rre_deg"])
    assert pose_errors_np(np.eye(4), gt)["rre_deg"] == pytest.approx(0.0, abs=1e-9)


def test_the_module_does_not_shadow_the_packages_pose_errors():
    """Named ``pose_errors.py`` at first, it replaced :func:`pcreg.geometry.pose_errors` (the
    package's lazy export) once imported: 25 tests of the suite failed, depending on order."""
    import pcreg.geometry
    import pcreg.geometry.lean_metrics

    assert callable(pcreg.geometry.pose_errors)
    assert pcreg.geometry.pose_errors(np.eye(4), np.eye(4))["rre_deg"] == 0.0
