"""Training augmentation of registration pairs, every draw from an explicit generator.

GeoTransformer's recipe: a random rotation applied to the source (3DMatch: any rotation;
KITTI: about the vertical axis) with the ground truth updated, Gaussian jitter (0.005 m indoor,
0.01 m outdoor) on both clouds, and for KITTI a scale factor in [0.95, 1.05]. Cropping removes
the points on one side of a random plane through the cloud (partial views, as in RPMNet).
All functions keep ``ref = T @ src`` true for the returned clouds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "AugmentationConfig",
    "augment_pair",
    "crop_by_plane",
    "jitter",
    "random_rotation_matrix",
    "rotate_source",
    "scale_pair",
]


def random_rotation_matrix(
    rng: np.random.Generator, max_angle_deg: float = 180.0, axis: str = "any", tilt_deg: float = 0.0
) -> np.ndarray:
    """A rotation with angle uniform in [0, max_angle] about a uniform random axis (``"any"``),
    or about z (``"z"``), optionally followed by small tilts about x and y (degrees, normal)."""
    angle = np.deg2rad(rng.uniform(0.0, max_angle_deg))
    if axis == "z":
        k = np.array([0.0, 0.0, 1.0])
        angle *= rng.choice([-1.0, 1.0])
    elif axis == "any":
        k = rng.normal(size=3)
        k /= np.linalg.norm(k)
    else:
        raise ValueError(f"axis must be 'any' or 'z', got {axis!r}")
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    r = np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx  # Rodrigues
    if tilt_deg > 0:
        for ax in (0, 1):
            a = np.deg2rad(rng.normal(0.0, tilt_deg))
            c, s = np.cos(a), np.sin(a)
            t = np.eye(3)
            i, j = [(1, 2), (0, 2)][ax]
            t[i, i], t[i, j], t[j, i], t[j, j] = c, -s, s, c
            r = t @ r
    return r


def rotate_source(
    src: np.ndarray, transform: np.ndarray, rotation: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rotate the source about its centroid by ``rotation``; returns the new source and the
    updated ``T_ref_src`` (so that ``ref = T_new @ src_new`` still holds)."""
    c = src.mean(0)
    move = np.eye(4)
    move[:3, :3] = rotation
    move[:3, 3] = c - rotation @ c
    new_src = src @ rotation.T + move[:3, 3]
    return new_src.astype(src.dtype), transform @ np.linalg.inv(move)


def jitter(
    points: np.ndarray, sigma: float, rng: np.random.Generator, clip: float | None = None
) -> np.ndarray:
    noise = rng.normal(0.0, sigma, points.shape)
    if clip is not None:
        noise = np.clip(noise, -clip, clip)
    return (points + noise).astype(points.dtype)


def scale_pair(
    src: np.ndarray, ref: np.ndarray, transform: np.ndarray, scale: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scale both clouds about their sensor origins: ``(src', ref', T')``; the rotation is
    unchanged, the translation scales."""
    t = transform.copy()
    t[:3, 3] *= scale
    return (src * scale).astype(src.dtype), (ref * scale).astype(ref.dtype), t


def crop_by_plane(points: np.ndarray, keep: float, rng: np.random.Generator) -> np.ndarray:
    """Keep the ``keep`` fraction of points on one side of a random plane through the centroid
    direction (RPMNet's partial-view cropping)."""
    normal = rng.normal(size=3)
    normal /= np.linalg.norm(normal)
    d = (points - points.mean(0)) @ normal
    return points[d >= np.quantile(d, 1.0 - keep)]


@dataclass(frozen=True)
class AugmentationConfig:
    """Defaults: GeoTransformer's 3DMatch recipe. KITTI: ``rotation_axis="z"``, ``noise=0.01``,
    ``scale=(0.95, 1.05)``, small tilts for outdoor data."""

    rotation_deg: float = 180.0
    rotation_axis: str = "any"
    tilt_deg: float = 0.0
    noise: float = 0.005
    scale: tuple[float, float] | None = None
    crop: float | None = None  # keep fraction for plane cropping of the source, or None
    # "manhattan": first rotate both clouds into their Manhattan frames, as the orientation
    # search does at inference (pcreg.geometry.manhattan.canonicalize_pair); then the
    # rotation above only has to cover that search's residual
    canonicalize: str | None = None


def augment_pair(
    src: np.ndarray,
    ref: np.ndarray,
    transform: np.ndarray,
    cfg: AugmentationConfig,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One augmented copy of a pair, ``(src', ref', T')``; ``ref' = T' src'`` holds (up to the
    jitter)."""
    t = np.asarray(transform, np.float64)
    if cfg.canonicalize == "manhattan":
        from pcreg.geometry.manhattan import canonicalize_pair

        src, ref, t = canonicalize_pair(src, ref, t, rng=rng)
    elif cfg.canonicalize is not None:
        raise ValueError(f"canonicalize must be None or 'manhattan', got {cfg.canonicalize!r}")
    if cfg.scale is not None:
        src, ref, t = scale_pair(src, ref, t, rng.uniform(*cfg.scale))
    if cfg.rotation_deg > 0:
        r = random_rotation_matrix(rng, cfg.rotation_deg, cfg.rotation_axis, cfg.tilt_deg)
        src, t = rotate_source(src, t, r)
    if cfg.crop is not None:
        src = crop_by_plane(src, cfg.crop, rng)
    if cfg.noise > 0:
        ref, src = jitter(ref, cfg.noise, rng), jitter(src, cfg.noise, rng)
    return src, ref, t
