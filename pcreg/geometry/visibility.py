"""Free space: where a scan's sensor saw nothing, no surface of the other scan may lie.

A scan taken from a point (a LiDAR, a depth camera, a terrestrial scanner's station) says more
than where the surfaces are: along each ray from the sensor to a return, the space in front
of the return is empty. Two scans registered right never contradict that, whatever their
overlap; at a wrong pose, the moved scan's surfaces land in space the other's sensor looked
through. This is the visibility consistency that Huber and Hebert (2003, "Fully automatic
registration of multiple 3D data sets", Image and Vision Computing 21(7)) use to verify
pairwise matches, measured here on a spherical range image.

:class:`RangeImage` keeps, per angular cell around an eye (:data:`CELL_DEG` degrees of
azimuth by as many of elevation), the nearest return, then the nearest over each cell and its
eight neighbours: a return's surface seen at a grazing angle, or between two cells, does not
make the space in front of it look empty. :func:`free_space_share` counts the points of the
other cloud that lie in a seen cell, nearer to the eye than that range by more than a margin
(:data:`MARGIN_VOXELS` voxels and :data:`MARGIN_SHARE` of the range).

The eye is the cloud's own origin: the sensor frame that LiDAR drivers, depth cameras and
scanner stations write. Where a cloud was moved away from its sensor, the measure can still
hold at the right pose, or not: seen from another eye, content the other cloud has and this
one lacks can land in front of this one's surfaces. :func:`sensor_view` tests whether a cloud
looks like one scan taken from the eye (little of it hidden behind itself, :func:`
hidden_share`); of 72 eyes 0.1-0.9 of the extent from the middle of each real and generated
room reference that pass it, a right pose put at most 0.053 in free space (BENCHMARKS.md,
"Free space"). Street scans hold from any eye near them (at most 0.065). An eye farther off
than the cloud's extent (a world frame) says nothing (:func:`eye_near`), and a reference cut
from a larger cloud says nothing beyond its convex hull (:class:`ReferenceView`).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "CELL_DEG",
    "HIDDEN_CELL_DEG",
    "HULL_DIRECTIONS",
    "MARGIN_SHARE",
    "MARGIN_VOXELS",
    "MAX_HULL_POINTS",
    "MAX_SOURCE",
    "MIN_JUDGED",
    "SENSOR_HIDDEN",
    "RangeImage",
    "ReferenceView",
    "eye_near",
    "free_space_share",
    "hidden_share",
    "seen_free_space",
    "sensor_view",
]

#: the range image's cells, degrees of azimuth and of elevation
CELL_DEG = 1.0
#: a point must lie this many voxels, plus :data:`MARGIN_SHARE` of the range, in front of the
#: nearest return of its cell's neighbourhood to count as lying in free space (noise, a
#: surface's thickness and ICP's last centimetres are within it)
MARGIN_VOXELS = 3.0
MARGIN_SHARE = 0.05
#: fewest points of the other cloud in seen cells to take the share on: a few stray or
#: flying points cannot make a tenth of it
MIN_JUDGED = 200
#: the cells of :func:`hidden_share`, degrees
HIDDEN_CELL_DEG = 0.5
#: the most of a reference that may hide behind itself, seen from its origin, for the origin
#: to count as its sensor (:func:`sensor_view`). Chosen on the real pairs of ``../shared/data``,
#: the TUM frames and generated rooms, each reference seen from 72 random eyes 0.1-0.9 of
#: its extent from its middle: without the test a right pose put up to 0.20 of the source in
#: free space from some of them; from the room eyes that pass it, at most 0.053 (``python
#: tools/free_space.py``; the true eyes hide 0.000-0.018)
SENSOR_HIDDEN = 0.02


def _spherical(points: np.ndarray, eye: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Azimuth and elevation (radians) and range of ``points (N, 3)`` seen from ``eye (3,)``."""
    d = np.asarray(points, np.float64) - np.asarray(eye, np.float64)
    r = np.sqrt((d * d).sum(axis=1))
    azimuth = np.arctan2(d[:, 1], d[:, 0])
    elevation = np.arcsin(np.clip(d[:, 2] / np.maximum(r, 1e-300), -1.0, 1.0))
    return azimuth, elevation, r


class RangeImage:
    """The nearest return per angular cell of ``points (N, 3)`` around ``eye (3,)`` (the
    points' units), over each cell's 3 x 3 neighbourhood; ``inf`` where none was seen.
    ``cell_deg``: the cell's size in degrees."""

    def __init__(
        self,
        points: np.ndarray,
        eye: np.ndarray,
        cell_deg: float = CELL_DEG,
        *,
        neighbours: bool = True,
    ) -> None:
        self.eye = np.asarray(eye, np.float64).reshape(3)
        self.cell = np.radians(cell_deg)
        self.columns = int(np.ceil(2 * np.pi / self.cell))
        self.rows = int(np.ceil(np.pi / self.cell)) + 1
        azimuth, elevation, r = _spherical(points, self.eye)
        row, col = self._cells(azimuth, elevation)
        near = np.full((self.rows, self.columns), np.inf)
        np.minimum.at(near, (row, col), r)
        if not neighbours:  # each cell's own nearest return
            self.nearest = near
            return
        # the neighbourhood's minimum: azimuth wraps around, elevation does not
        padded = np.pad(near, ((1, 1), (0, 0)), constant_values=np.inf)
        rows = np.minimum(np.minimum(padded[:-2], padded[1:-1]), padded[2:])
        self.nearest = np.minimum(
            np.minimum(rows, np.roll(rows, 1, axis=1)), np.roll(rows, -1, axis=1)
        )

    def _cells(self, azimuth: np.ndarray, elevation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        col = np.floor((azimuth + np.pi) / self.cell).astype(np.int64) % self.columns
        row = np.clip(
            np.floor((elevation + np.pi / 2) / self.cell).astype(np.int64), 0, self.rows - 1
        )
        return row, col

    def lookup(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For ``points (K, 3)``: the nearest return of each one's neighbourhood ``(K,)``
        (``inf``: unseen) and each one's range ``(K,)``."""
        azimuth, elevation, r = _spherical(points, self.eye)
        row, col = self._cells(azimuth, elevation)
        return self.nearest[row, col], r


def eye_near(points: np.ndarray, eye: np.ndarray, extent: float) -> bool:
    """Whether ``eye (3,)`` sees ``points (N, 3)`` from near enough to judge free space: the
    median range is at most the cloud's ``extent`` (its robust diagonal). A LiDAR scan's
    median range is about a tenth of its extent, a room scan's a quarter to a half; a cloud
    in a world frame whose origin lies far off is seen in a few cells, each many metres wide."""
    if len(points) == 0 or not np.isfinite(extent) or extent <= 0:
        return False
    d = np.asarray(points, np.float64) - np.asarray(eye, np.float64)
    return float(np.median(np.sqrt((d * d).sum(axis=1)))) <= extent


def hidden_share(
    points: np.ndarray,
    normals: np.ndarray,
    eye: np.ndarray,
    voxel: float,
    cell_deg: float = HIDDEN_CELL_DEG,
) -> float:
    """The share (0-1) of ``points (N, 3)`` hidden behind another of them, seen from ``eye
    (3,)``: farther than the nearest point of their own ``cell_deg`` cell by more than
    :data:`MARGIN_VOXELS` ``voxel`` plus the range a surface with their normal (``normals (N,
    3)``, unoriented) spans across the cell (a floor seen at a grazing angle is not hidden
    behind itself; incidence capped at 84 deg). A scan seen from its own sensor hides almost
    nothing (every return was the first along its ray); from elsewhere, its far surfaces lie
    behind its near ones. 1.0 for an empty cloud."""
    if len(points) == 0:
        return 1.0
    image = RangeImage(points, eye, cell_deg, neighbours=False)
    nearest, r = image.lookup(points)
    direction = (np.asarray(points, np.float64) - image.eye) / np.maximum(r, 1e-300)[:, None]
    cos = np.clip(np.abs((direction * np.asarray(normals, np.float64)).sum(axis=1)), 0.1, 1.0)
    spread = r * image.cell * np.sqrt(1.0 - cos**2) / cos  # the surface's range across a cell
    return float(np.mean(r > nearest + MARGIN_VOXELS * voxel + spread))


def free_space_share(
    points: np.ndarray,
    image: RangeImage,
    voxel: float,
    min_judged: int = MIN_JUDGED,
) -> tuple[float | None, int]:
    """The share (0-1) of ``points (K, 3)`` (already moved into the image's frame) that lie in
    seen cells of ``image`` nearer to its eye than the nearest return there, by more than
    :data:`MARGIN_VOXELS` ``voxel`` plus :data:`MARGIN_SHARE` of that range; and how many
    points were judged (those in seen cells). ``None`` under ``min_judged`` points judged."""
    nearest, r = image.lookup(points)
    seen = np.isfinite(nearest)
    judged = int(seen.sum())
    if judged < min_judged:
        return None, judged
    limit = nearest[seen] * (1.0 - MARGIN_SHARE) - MARGIN_VOXELS * voxel
    return float(np.mean(r[seen] < limit)), judged


class ReferenceView:
    """What a reference ``(M, 3)`` says about free space, seen from ``eye (3,)``: its
    :class:`RangeImage` and its convex hull's planes, built once and used for every estimate
    of a registration (:meth:`free_space`). ``judged`` False: the eye is not :func:`eye_near`
    it, or the caller's :func:`sensor_view` found the eye not to be its sensor
    (``sensor=False``); nothing is measured then.

    Only the source's points inside the reference's convex hull (bounded from outside by
    :data:`HULL_DIRECTIONS` supporting planes) are counted: a reference
    cropped or cut from a larger scan (a chunk, a region of interest) keeps far surfaces whose
    near content was cut away, so the space in front of them is not known to be empty, and
    the source's content there lies outside the cut reference's hull. Without it, 12 of 52
    chunks and crops of the real 3DMatch fragments used as the reference put 0.10-0.16 of the
    other fragment in free space at the truth; with it at most 0.058, none over 0.1."""

    def __init__(self, ref: np.ndarray, eye: np.ndarray, sensor: bool | None = None) -> None:
        ref = np.asarray(ref, np.float64)
        self.judged = sensor is not False and len(ref) >= 4
        if self.judged:
            lo, hi = np.percentile(ref, [1, 99], axis=0)  # the robust diagonal
            self.judged = eye_near(ref, eye, float(np.linalg.norm(hi - lo)))
        self.image = RangeImage(ref, eye) if self.judged else None
        step = max(1, -(-len(ref) // MAX_HULL_POINTS))
        self.planes = _hull_planes(ref[::step]) if self.judged else np.zeros((0, 4))

    def free_space(self, src: np.ndarray, transform: np.ndarray, voxel: float) -> float | None:
        """:func:`free_space_share` of the points of ``src (N, 3)`` moved by ``transform (4,
        4)`` (``T_ref_src``) that land inside the reference's hull; ``None`` when not judged,
        or under :data:`MIN_JUDGED` such points in seen cells. On the 3DMatch demo pair at 5 cm
        about 8 ms an estimate, and 9 ms to build the view (measured beside other work)."""
        if not self.judged or self.image is None or not len(self.planes):
            return None
        src = np.asarray(src, np.float64)
        src = src[:: -(-len(src) // MAX_SOURCE)] if len(src) > MAX_SOURCE else src
        t = np.asarray(transform, np.float64)
        moved = src @ t[:3, :3].T + t[:3, 3]
        inside = np.all(moved @ self.planes[:, :3].T + self.planes[:, 3] <= 1e-9, axis=1)
        return free_space_share(moved[inside], self.image, voxel)[0]


#: the directions of the reference's bounding polytope (:func:`_hull_planes`): an outer
#: approximation of its convex hull by this many supporting planes, spread evenly over the
#: sphere (a Fibonacci lattice); a plane cut at any angle lies within about 7 deg of one
HULL_DIRECTIONS = 256
#: the reference's points the hull is taken from, and the source's points the share is
#: taken on, at most (even strides): a KITTI scan at 0.3 m has 17,000 of each, and the
#: 256 planes cost 10 ms a product there
MAX_HULL_POINTS = 8000
MAX_SOURCE = 5000


def _hull_planes(cloud: np.ndarray, directions: int = HULL_DIRECTIONS) -> np.ndarray:
    """The convex hull of ``cloud (M, 3)``, approximated from outside by ``directions``
    supporting planes (a discrete-orientation polytope: numpy only, no scipy on the lean
    command line), as ``(F, 4)`` planes ``n . x + d <= 0`` inside; none for an empty cloud.
    About 4 ms for 5,000 points."""
    if len(cloud) == 0:
        return np.zeros((0, 4))
    k = np.arange(directions) + 0.5
    polar = np.arccos(1.0 - 2.0 * k / directions)
    azimuth = np.pi * (1.0 + 5.0**0.5) * k
    normals = np.column_stack([np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar),
                               np.cos(polar)])  # fmt: skip
    reach = (np.asarray(cloud, np.float64) @ normals.T).max(axis=0)
    return np.column_stack([normals, -reach])


def seen_free_space(
    src: np.ndarray,
    ref: np.ndarray,
    transform: np.ndarray,
    voxel: float,
    ref_eye: np.ndarray,
    sensor: bool | None = None,
) -> float | None:
    """:meth:`ReferenceView.free_space` of ``src (N, 3)`` moved by ``transform (4, 4)``
    (``T_ref_src``) in what ``ref (M, 3)`` saw from ``ref_eye (3,)`` (each cloud in its own
    frame, the clouds' units; ``voxel`` their sampling; ``sensor``: as for the view).

    One way only: the source's own origin is often not its sensor (a benchmark, or a user,
    moves it), and from a wrong eye the reference's content that the source lacks lands in
    front of the source's surfaces at the right pose: a chunk of 3DMatch fragment 6, moved,
    against fragment 5 measured 0.34 that way at the truth. From the reference's side the
    same holds for what the source has and the reference lacks, which is why a room's
    reference must look like its sensor's view (:func:`sensor_view`)."""
    return ReferenceView(ref, ref_eye, sensor).free_space(src, transform, voxel)


def sensor_view(points: np.ndarray, normals: np.ndarray, eye: np.ndarray, voxel: float) -> bool:
    """Whether ``points (N, 3)`` (with ``normals (N, 3)``, ``voxel`` their sampling) look like
    one scan taken from ``eye (3,)``: at most :data:`SENSOR_HIDDEN` of them hidden behind the
    others (:func:`hidden_share`). From their own sensors: the real 3DMatch fragment 0 (fused
    from a hand-held camera's frames) 0.018, TUM RGB-D frames 0.007, generated room fragments
    0.003, generated scanner stations 0.000; KITTI scans 0.095-0.098 (foliage and thin poles
    the laser sees past), which is why streets are judged without it."""
    return hidden_share(points, normals, eye, voxel) <= SENSOR_HIDDEN
