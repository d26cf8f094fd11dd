"""Dataset neighbor-limit calibration on generated rooms."""

from __future__ import annotations

from pcreg.data.calibration import calibrate_dataset
from pcreg.data.synthetic import indoor_pairs


def test_calibrated_limits_cover_most_neighborhoods():
    pairs = [(p.src, p.ref, p.transform) for p in indoor_pairs(2)][:3]
    limits = calibrate_dataset(
        pairs, voxel_size=0.025, num_stages=4, search_radius=0.0625, num_samples=3
    )
    assert len(limits) == 4 and all(8 <= x <= 80 for x in limits)
    looser = calibrate_dataset(
        pairs, voxel_size=0.025, num_stages=4, search_radius=0.0625, num_samples=3, coverage=0.95
    )
    assert all(a >= b for a, b in zip(looser, limits, strict=True))
    assert sum(looser) > sum(limits)
