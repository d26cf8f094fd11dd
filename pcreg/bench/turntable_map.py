"""The ``pcreg map`` check of issue #45 on turntable range scans: every view of an object
(the Stanford bunny's 10, the dragon's 15: evaluation data, never tuned on) moved by a random
rigid motion and given in a shuffled order; the map must place every view within
:data:`MAX_ROTATION_DEG` and :data:`MAX_TRANSLATION_FRACTION` of the object's diagonal of
the ``.conf`` poses (``pairs.json``'s ``T_world_scan``), after aligning the first view given.

The errors of view k: ``E = inv(G_k) @ P_k``, with ``P_k`` the map's ``T_world_scan`` and
``G_k`` the truth in the same world (the first given view's frame); the rotation error is
``E``'s angle and the translation error is how far ``E`` moves the view's centroid (the error
where the object is, not at the scanner origin the random motion put far away).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "MAX_ROTATION_DEG",
    "MAX_TRANSLATION_FRACTION",
    "TurntableCase",
    "placement_errors",
    "turntable_case",
]

MAX_ROTATION_DEG = 2.0
MAX_TRANSLATION_FRACTION = 0.01


@dataclass
class TurntableCase:
    """``files`` the moved views written as ``.npy`` (float64, metres) in the order given,
    ``truth (K, 4, 4)`` their true ``T_world_scan`` (the object's frame, moved views),
    ``names`` the original views in that order and ``diagonal`` the object's bounding-box
    diagonal (metres)."""

    files: list[Path]
    truth: np.ndarray
    names: list[str]
    diagonal: float


def _random_motion(rng: np.random.Generator, extent: float) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    motion = np.eye(4)
    motion[:3, :3] = Rotation.random(random_state=rng).as_matrix()
    motion[:3, 3] = rng.uniform(-1.0, 1.0, 3) * extent
    return motion


def turntable_case(
    root: Path, out: Path, seed: int = 0, shuffle: bool = True, overwrite: bool = False
) -> TurntableCase:
    """Write the views of ``root`` (a ``stanford_*_range_scans`` folder) into ``out``, each
    moved by a random rigid motion (rotation uniform on SO(3), translation up to the object's
    diagonal per axis) and in a shuffled order, named ``view_00.npy ...`` (the name says
    nothing of the original). ``shuffle=False`` keeps ``pairs.json``'s order (the dragon's:
    around the turntable, a loop sequence).

    Raises:
        OutputExistsError: ``out`` already holds views and ``overwrite`` is False (checked
            before anything is written).
    """
    from pcreg.errors import OutputExistsError

    if not overwrite and Path(out).is_dir() and any(Path(out).glob("view_*.npy")):
        raise OutputExistsError(out, "already holds views (pass --force to replace them)")
    meta = json.loads((Path(root) / "pairs.json").read_text())
    scans = meta["scans"]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(scans)) if shuffle else np.arange(len(scans))
    world = []
    for s in scans:
        pts = np.load(Path(root) / s["file"]).astype(np.float64)
        t = np.asarray(s["T_world_scan"], np.float64)
        world.append(pts @ t[:3, :3].T + t[:3, 3])
    every = np.concatenate(world)
    diagonal = float(np.linalg.norm(every.max(0) - every.min(0)))
    out.mkdir(parents=True, exist_ok=True)
    files, truth, names = [], [], []
    for n, k in enumerate(order.tolist()):
        pts = np.load(Path(root) / scans[k]["file"]).astype(np.float64)
        motion = _random_motion(rng, diagonal)
        path = out / f"view_{n:02d}.npy"
        np.save(path, pts @ motion[:3, :3].T + motion[:3, 3])
        files.append(path)
        truth.append(np.asarray(scans[k]["T_world_scan"], np.float64) @ np.linalg.inv(motion))
        names.append(Path(scans[k]["file"]).stem)
    return TurntableCase(files, np.stack(truth), names, diagonal)


def placement_errors(
    poses: np.ndarray, case: TurntableCase, clouds: list[np.ndarray]
) -> dict[str, np.ndarray]:
    """``{"rotation_deg": (K,), "translation": (K,) metres, "fraction": (K,) of the
    diagonal}`` per view (NaN where the map left a view unplaced), after aligning the first
    view given (the map's world frame)."""
    truth = np.linalg.inv(case.truth[0]) @ case.truth  # in the first view's frame
    rot, trans = [], []
    for pose, gt, cloud in zip(poses, truth, clouds, strict=True):
        if not np.isfinite(pose).all():
            rot.append(np.nan)
            trans.append(np.nan)
            continue
        error = np.linalg.inv(gt) @ pose
        cos = (np.trace(error[:3, :3]) - 1) / 2
        rot.append(float(np.degrees(np.arccos(np.clip(cos, -1, 1)))))
        c = np.asarray(cloud, np.float64).mean(axis=0)
        trans.append(float(np.linalg.norm(error[:3, :3] @ c + error[:3, 3] - c)))
    trans_a = np.array(trans)
    return {"rotation_deg": np.array(rot), "translation": trans_a,
            "fraction": trans_a / case.diagonal}  # fmt: skip
