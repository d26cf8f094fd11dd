"""KITTI odometry: scans, poses, calibration, the standard pair selection and pair metadata.

Layout (see ``data/README.md``): ``<root>/sequences/<NN>/velodyne/<frame>.bin``,
``<root>/sequences/<NN>/calib.txt`` (``Tr``: velodyne -> cam0), poses in ``<root>/poses/<NN>.txt``
or ``<root>/sequences/<NN>/poses.txt`` (cam0, 3x4 per line), optional GeoTransformer metadata
``<root>/metadata/{train,val,test}.pkl`` and ``downsampled/<NN>/<frame>.npy``.

Velodyne pose of frame k: ``V_k = inv(Tr) P_k Tr`` (back to cam0: ``P_k = Tr V_k inv(Tr)``);
pair ground truth ``T_ref_src = inv(V_ref) V_src`` (``ref = T src``); the later frame of a pair
is the reference (GeoTransformer's ``frame0``). Splits: sequences 0-5 train, 6-7 val, 8-10
test. Pairs: from each frame, the next frame at least ``min_distance`` (10 m) away; the search
then continues after it. The pose-derived ground truth is refined once with point-to-point ICP
and cached.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pcreg.data.threedmatch import _load_records
from pcreg.errors import CorruptFileError, InputError, MissingFileError
from pcreg.io import read_points, validate_transform

__all__ = [
    "SPLITS",
    "KittiPairs",
    "KittiRecord",
    "camera_poses",
    "read_calib_tr",
    "read_kitti_metadata",
    "read_poses",
    "select_pairs",
    "velodyne_poses",
]

logger = logging.getLogger(__name__)

SPLITS = {"train": (0, 1, 2, 3, 4, 5), "val": (6, 7), "test": (8, 9, 10)}
VOXEL_SIZE = 0.3


def _splits_text() -> str:
    """``"train (00-05), val (06-07) or test (08-10)"``: the splits and their sequences."""
    parts = [f"{n} ({seqs[0]:02d}-{seqs[-1]:02d})" for n, seqs in SPLITS.items()]
    return ", ".join(parts[:-1]) + f" or {parts[-1]}"


@dataclass(frozen=True)
class KittiRecord:
    seq: int
    ref_frame: int
    src_frame: int
    transform: np.ndarray  # (4, 4) float64, ref = T src
    ref_path: str | None = None  # metadata-relative paths (GeoTransformer's downsampled npy)
    src_path: str | None = None


def read_poses(path: str | os.PathLike[str]) -> np.ndarray:
    """KITTI poses file -> ``(F, 4, 4)`` float64."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(path, "poses file not found")
    try:
        rows = np.loadtxt(path, ndmin=2)
    except ValueError as err:
        raise CorruptFileError(path, f"cannot parse poses ({err})") from None
    if rows.shape[1] != 12:
        raise CorruptFileError(path, f"expected 12 numbers per line, got {rows.shape[1]}")
    out = np.tile(np.eye(4), (len(rows), 1, 1))
    out[:, :3, :4] = rows.reshape(-1, 3, 4)
    return out


def read_calib_tr(path: str | os.PathLike[str]) -> np.ndarray:
    """The ``Tr:`` line of a KITTI ``calib.txt`` as a ``(4, 4) float64`` rigid transform
    ``T_cam0_velo`` (metres): it maps Velodyne points into the left (cam0) camera's frame.

    Raises:
        MissingFileError: no such file.
        CorruptFileError: not text, no ``Tr:`` line, or a ``Tr:`` line that is not 12 numbers.
        NonFiniteError, NonRigidTransformError: ``Tr`` is not a finite rigid motion.
    """
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(path, "calibration file not found")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise CorruptFileError(path, "not a text calibration file") from None
    for line in text.splitlines():
        if line.startswith("Tr:"):
            try:
                values = [float(v) for v in line.split()[1:]]
            except ValueError as err:
                raise CorruptFileError(path, f"cannot parse the Tr: line ({err})") from None
            if len(values) != 12:
                raise CorruptFileError(path, f"Tr: needs 12 numbers, got {len(values)}")
            return validate_transform(values, path)
    raise CorruptFileError(path, "no 'Tr:' line")


def velodyne_poses(cam_poses: np.ndarray, tr: np.ndarray) -> np.ndarray:
    """Camera (cam0) poses to Velodyne poses: ``V_k = inv(Tr) P_k Tr``.

    Args:
        cam_poses: ``(..., 4, 4)`` poses ``P_k``, cam0 frame k -> cam0 frame 0 (KITTI's
            ``poses.txt``), metres.
        tr: ``(4, 4)`` ``T_cam0_velo`` (:func:`read_calib_tr`).

    Returns:
        ``(..., 4, 4)`` float64 ``V_k``: Velodyne frame k -> Velodyne frame 0. The inverse of
        :func:`camera_poses`.
    """
    return np.linalg.inv(tr) @ cam_poses @ tr


def camera_poses(velo_poses: np.ndarray, tr: np.ndarray) -> np.ndarray:
    """Velodyne poses to camera (cam0) poses: ``P_k = Tr V_k inv(Tr)``.

    A point ``x`` in cam0 frame k is ``inv(Tr) x`` in Velodyne frame k, ``V_k inv(Tr) x`` in
    Velodyne frame 0 and ``Tr V_k inv(Tr) x`` in cam0 frame 0. The same holds for relative
    motions (``T_{k-1 <- k}``), so chains convert link by link.

    Args:
        velo_poses: ``(..., 4, 4)`` poses ``V_k``, Velodyne frame k -> Velodyne frame 0
            (what :func:`pcreg.odometry.run_odometry` returns), metres.
        tr: ``(4, 4)`` ``T_cam0_velo`` (:func:`read_calib_tr`).

    Returns:
        ``(..., 4, 4)`` float64 ``P_k``: cam0 frame k -> cam0 frame 0, the frame of KITTI's
        official ``poses.txt``. The inverse of :func:`velodyne_poses`.
    """
    tr = np.asarray(tr, np.float64)
    return tr @ np.asarray(velo_poses, np.float64) @ np.linalg.inv(tr)


def select_pairs(positions: np.ndarray, min_distance: float = 10.0) -> list[tuple[int, int]]:
    """Standard KITTI pair selection: from frame i, pair with the first later frame j at least
    ``min_distance`` metres away, then continue from j + 1. ``positions (F, 3)``."""
    pairs, i, n = [], 0, len(positions)
    while i < n:
        dist = np.linalg.norm(positions[i + 1 :] - positions[i], axis=1)
        far = np.nonzero(dist >= min_distance)[0]
        if far.size == 0:
            break
        j = i + 1 + int(far[0])
        pairs.append((i, j))
        i = j + 1
    return pairs


def read_kitti_metadata(path: str | os.PathLike[str]) -> list[KittiRecord]:
    """GeoTransformer's KITTI ``.pkl`` (or our ``.json``): ``pcd0`` = reference = ``frame0``."""
    out = []
    for r in _load_records(Path(path)):
        out.append(
            KittiRecord(
                int(r["seq_id"]),
                int(r["frame0"]),
                int(r["frame1"]),
                np.asarray(r["transform"], np.float64),
                str(r["pcd0"]),
                str(r["pcd1"]),
            )
        )
    return out


class KittiPairs:
    """Pairs of a KITTI split: ``pairs[i]`` -> ``(src (M,3), ref (N,3), T (4,4), record)``.

    With ``<root>/metadata/<split>.pkl|json`` present the listed pairs are used as published;
    otherwise pairs are selected from the sequences' poses (``select_pairs``) and, with
    ``refine=True``, their ground truth is refined by ICP and cached in ``<root>/icp_cache``.
    ``split`` and ``sequences`` say where the pairs were looked for (:meth:`no_pairs`).

    Raises:
        InputError: ``split`` is none of :data:`SPLITS` and has no metadata file.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        split: str = "test",
        sequences: tuple[int, ...] | None = None,
        refine: bool = True,
        min_distance: float = 10.0,
    ) -> None:
        self.root = Path(root)
        self.refine = refine
        self.split = split
        self.min_distance = min_distance
        meta = [self.root / "metadata" / f"{split}.{ext}" for ext in ("pkl", "json")]
        found = [m for m in meta if m.is_file()]
        if found and sequences is None:
            self.records = read_kitti_metadata(found[0])
            self.sequences = tuple(sorted({r.seq for r in self.records}))
            self.refine = False  # published ground truth is already refined
            return
        if sequences is None and split not in SPLITS:
            raise InputError(
                self.root,
                f"unknown KITTI split {split!r}: use {_splits_text()}, or give "
                f"metadata/{split}.pkl",
            )
        seqs = tuple(sequences if sequences is not None else SPLITS[split])
        self.sequences = seqs
        self.records = []
        for seq in seqs:
            frames = self._frames(seq)
            if not frames:
                continue
            poses = self._velodyne_poses(seq)
            frames = [f for f in frames if f < len(poses)]
            pos = poses[frames, :3, 3]
            for a, b in select_pairs(pos, min_distance):
                i, j = frames[a], frames[b]
                # as in GeoTransformer's metadata: the later frame is the reference
                t = np.linalg.inv(poses[j]) @ poses[i]  # frame i (src) -> later frame j (ref)
                self.records.append(KittiRecord(seq, j, i, t))

    def no_pairs(self, choose: str) -> InputError:
        """The error for a split without pairs: which split and sequences were looked for,
        which sequences have scans, and how to choose another split (``choose``: the
        caller's way with ``{}`` for the split's name, e.g. ``"--benchmark {}"``), naming the
        splits that have scans."""
        looked = ", ".join(f"{q:02d}" for q in self.sequences) or "none"
        scanned = sorted(
            int(d.name)
            for d in (self.root / "sequences").glob("[0-9]*")
            if d.name.isdigit() and any((d / "velodyne").glob("*.bin"))
        )
        where = f"split {self.split!r} (sequences {looked})"
        if set(scanned) & set(self.sequences):
            problem = (
                f"no KITTI pairs in {where}: no two scans of a sequence are "
                f"{self.min_distance:g} m apart"
            )
        else:
            problem = f"no KITTI pairs in {where}: none of them has sequences/NN/velodyne/*.bin"
            if scanned:
                problem += f"; scans exist for sequences {', '.join(f'{q:02d}' for q in scanned)}"
        others = [n for n in SPLITS if n != self.split]
        present = [n for n in others if set(SPLITS[n]) & set(scanned)]
        options = " or ".join(choose.format(n) for n in present or others)
        return InputError(self.root, f"{problem}; choose another split: {options}")

    def _seq_dir(self, seq: int) -> Path:
        return self.root / "sequences" / f"{seq:02d}"

    def _frames(self, seq: int) -> list[int]:
        velo = self._seq_dir(seq) / "velodyne"
        return sorted(int(p.stem) for p in velo.glob("*.bin")) if velo.is_dir() else []

    def _velodyne_poses(self, seq: int) -> np.ndarray:
        for p in (self.root / "poses" / f"{seq:02d}.txt", self._seq_dir(seq) / "poses.txt"):
            if p.is_file():
                return velodyne_poses(
                    read_poses(p), read_calib_tr(self._seq_dir(seq) / "calib.txt")
                )
        raise MissingFileError(self.root / "poses" / f"{seq:02d}.txt", "poses file not found")

    def scan_path(self, seq: int, frame: int, rel: str | None = None) -> Path:
        """The file of a scan: the metadata's (downsampled ``.npy``) when present, else the
        sequence's Velodyne ``.bin``."""
        if rel is not None and (self.root / rel).is_file():
            return self.root / rel
        return self._seq_dir(seq) / "velodyne" / f"{frame:06d}.bin"

    def load_scan(self, seq: int, frame: int, rel: str | None = None) -> np.ndarray:
        path = self.scan_path(seq, frame, rel)
        if path.suffix == ".npy":
            return np.load(path).astype(np.float32)[:, :3]
        return read_points(path).astype(np.float32)  # read_points gives float64

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, KittiRecord]:
        r = self.records[i]
        ref = self.load_scan(r.seq, r.ref_frame, r.ref_path)
        src = self.load_scan(r.seq, r.src_frame, r.src_path)
        t = self._refined(r, src, ref) if self.refine else r.transform
        return src, ref, t, r

    def _refined(self, r: KittiRecord, src: np.ndarray, ref: np.ndarray) -> np.ndarray:
        from pcreg._fs import atomic_output

        cache = self.root / "icp_cache" / f"{r.seq:02d}_{r.ref_frame:06d}_{r.src_frame:06d}.npy"
        if cache.is_file():
            return np.load(cache)
        t = refine_with_icp(src, ref, r.transform)
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            with atomic_output(cache, overwrite=True) as tmp:
                np.save(tmp, t)
        except OSError:
            logger.warning("cannot cache refined ground truth at %s", cache)
        return t


def refine_with_icp(
    src: np.ndarray,
    ref: np.ndarray,
    init: np.ndarray,
    voxel: float = 0.05,
    max_distance: float = 0.3,
) -> np.ndarray:
    """Point-to-point ICP (Open3D) from ``init``; returns the refined ``T_ref_src``."""
    import open3d as o3d

    def cloud(p):
        pcd = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(p, np.float64)))
        return pcd.voxel_down_sample(voxel)

    reg = o3d.pipelines.registration
    result = reg.registration_icp(
        cloud(src),
        cloud(ref),
        max_distance,
        np.asarray(init, np.float64),
        reg.TransformationEstimationPointToPoint(),
        reg.ICPConvergenceCriteria(max_iteration=100),
    )
    return np.asarray(result.transformation)
