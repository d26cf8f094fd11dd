"""Two stations of a terrestrial scanner in one generated room: whole-room scans, the kind a
360-degree room scanner exports (:class:`~pcreg.data.synthetic.scanners.PanoramicScanner`).

A room of :func:`~pcreg.data.synthetic.scenes.indoor_room` (3.5-8 x 3-6.5 x 2.4-3 m), optionally
enlarged by ``scale`` (its furniture with it), is scanned from two free positions at least
1.5 m apart, 1.2-1.7 m above the floor. The source is given in a random frame (a uniformly
random rotation about its station), the reference in its station's frame, level. Unlike an
RGB-D fragment (3-4 m of a room, 100-400 superpoints at the ``indoor`` network's 0.4 m) a
station sees every wall: 600-1,900 superpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pcreg.data.synthetic.pairs import _free
from pcreg.data.synthetic.scanners import PanoramicScanner, raycaster
from pcreg.data.synthetic.scenes import indoor_room
from pcreg.data.transforms import random_rotation_matrix

__all__ = ["StationPair", "station_pair"]


@dataclass(frozen=True)
class StationPair:
    """Two stations' scans ``(N, 3)`` float64 (metres), ``transform`` ``(4, 4)``
    ``T_ref_src``, and the room's extent ``(3,)`` (metres)."""

    src: np.ndarray
    ref: np.ndarray
    transform: np.ndarray
    extent: np.ndarray


def station_pair(
    seed: int, scale: float = 1.0, scanner: PanoramicScanner | None = None
) -> StationPair:
    """The two stations of room ``seed`` enlarged ``scale`` times (deterministic by both)."""
    rng = np.random.default_rng(seed)
    scanner = scanner or PanoramicScanner()
    mesh, extent = indoor_room(rng)
    mesh.scale(scale, center=(0.0, 0.0, 0.0))
    extent = extent * scale
    scene = raycaster(mesh)
    stations: list[np.ndarray] = []
    for _ in range(2000):
        pos = np.array([rng.uniform(0.5, extent[0] - 0.5), rng.uniform(0.5, extent[1] - 0.5),
                        rng.uniform(1.2, 1.7)])  # fmt: skip
        if _free(scene, pos, extent[2]) and all(np.linalg.norm(pos - q) > 1.5 for q in stations):
            stations.append(pos)
        if len(stations) == 2:
            break
    if len(stations) < 2:
        raise ValueError(f"room {seed} at x{scale:g} has no two free stations 1.5 m apart")
    first, second = (scanner.scan(scene, p, rng) for p in stations)
    rot = random_rotation_matrix(rng)
    to_src = np.eye(4)
    to_src[:3, :3], to_src[:3, 3] = rot, -rot @ stations[0]
    to_ref = np.eye(4)
    to_ref[:3, 3] = -stations[1]
    src = first @ to_src[:3, :3].T + to_src[:3, 3]
    ref = second + to_ref[:3, 3]
    return StationPair(src, ref, to_ref @ np.linalg.inv(to_src), extent)
