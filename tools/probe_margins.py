"""The symmetry probe and the fit constraint on the real pairs of ``../shared/data``, at the
default registration's pose (right on these pairs): the probe's margin and time with and
without its face turns (:data:`pcreg.registration.symmetry.PROBE_FACE_AXES`), and
:func:`pcreg.registration.symmetry.fit_constraint`.

    python tools/probe_margins.py [--shared-data ../shared/data] [--runs 5]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    import pcreg
    import pcreg.registration.symmetry as symmetry
    import pcreg.registration.verdict as verdict
    from pcreg.bench.real_pairs import real_pairs
    from pcreg.geometry.clouds import downsample_with_normals
    from pcreg.io import read_points

    for pair in real_pairs(args.shared_data):
        src, ref = read_points(pair.src), read_points(pair.ref)
        result = pcreg.register(src, ref)
        voxel = 0.3 if pair.name.startswith("KITTI") else 0.05  # the settings' voxels
        sd, rd = downsample_with_normals(src, voxel), downsample_with_normals(ref, voxel)
        row = [f"{pair.name:15s}", f"registered {result.registered}"]
        for faces in (False, True):
            symmetry.PROBE_FACE_AXES = faces
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                centre, size = src.mean(axis=0), verdict.scene_size(ref)
                margin, _ = symmetry.symmetry_probe(sd, rd, result.transform, voxel, centre, size)
                times.append(time.perf_counter() - start)
            label = "with face turns" if faces else "principal axes only"
            row.append(f"{label}: margin {margin:.2f}, {1000 * np.median(times):.1f} ms")
        row.append(f"constraint {symmetry.fit_constraint(sd, rd, result.transform, voxel):.3f}")
        print(" | ".join(row))


if __name__ == "__main__":
    main()
