"""Reading, writing and validating 4x4 rigid transforms.

Transforms are ``(4, 4) float64`` matrices ``T_ref_src`` in the column-vector convention
``ref = R @ src + t`` (DESIGN §2). Every failure raises a subclass of
:class:`pcreg.errors.InputError` whose message starts with the file path (or the argument's
name) and fits on one line; writers are atomic and refuse to overwrite unless
``overwrite=True``. :mod:`pcreg.io` re-exports everything here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from pcreg._fs import atomic_output
from pcreg.errors import (
    CorruptFileError,
    InputError,
    NonFiniteError,
    NonRigidTransformError,
    ShapeError,
)
from pcreg.io_formats._common import check_file, check_suffix

__all__ = [
    "MAX_TRANSLATION",
    "RIGID_ATOL",
    "TRANSFORM_FORMATS",
    "read_transform",
    "validate_transform",
    "write_transform",
]

PathLike = str | os.PathLike[str]

TRANSFORM_FORMATS = (".txt", ".npy", ".json")

#: the largest translation (metres) a transform may have: ~a light-second, far beyond any
#: georeferenced survey, and far below where squared distances overflow
MAX_TRANSLATION = 1e12

#: Default tolerance of :func:`validate_transform`. The 3DMatch ground-truth rotations are off
#: orthonormal by up to 1.2e-3 (DESIGN §7), so the check must accept that much.
RIGID_ATOL = 5e-3


def validate_transform(
    matrix: np.ndarray, source: PathLike = "transform", *, atol: float = RIGID_ATOL
) -> np.ndarray:
    """Check that ``matrix`` is a finite 4x4 rigid transform and return it as float64.

    A 3x4 matrix (a KITTI pose line) is completed with the row ``[0, 0, 0, 1]``.

    Args:
        matrix: ``(4, 4)`` or ``(3, 4)`` array, or 16 / 12 numbers.
        source: file path or argument name used in error messages.
        atol: tolerance on ``|R^T R - I|``, ``|det R - 1|`` and the bottom row. The default
            (5e-3) accepts the slightly non-orthonormal 3DMatch ground truth.

    Raises:
        ShapeError, NonFiniteError, NonRigidTransformError.
    """
    try:
        arr = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ShapeError(source, f"transform is not numeric ({exc})") from exc
    if arr.size == 12 and arr.shape in ((12,), (3, 4)):
        arr = np.vstack([arr.reshape(3, 4), [0.0, 0.0, 0.0, 1.0]])
    elif arr.size == 16 and arr.shape in ((16,), (4, 4)):
        arr = arr.reshape(4, 4)
    elif arr.ndim == 1:  # a text file's numbers, read in a row
        raise ShapeError(source, f"expected a 4x4 (or 3x4) transform, got {arr.size} numbers")
    else:
        raise ShapeError(source, f"expected a 4x4 (or 3x4) transform, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise NonFiniteError(source, "transform contains NaN/Inf")
    if np.abs(arr[:3, 3]).max() > MAX_TRANSLATION:
        raise NonRigidTransformError(
            source,
            f"translation of {np.abs(arr[:3, 3]).max():.3g} m is beyond {MAX_TRANSLATION:g} m "
            "(no scan spans that; errors and distances would overflow)",
        )
    rot = arr[:3, :3]
    ortho_err = float(np.abs(rot.T @ rot - np.eye(3)).max())
    det = float(np.linalg.det(rot))
    bottom_err = float(np.abs(arr[3] - [0.0, 0.0, 0.0, 1.0]).max())
    if bottom_err > atol:
        raise NonRigidTransformError(
            source, f"bottom row is {arr[3].tolist()}, expected [0, 0, 0, 1]"
        )
    if ortho_err > atol:
        raise NonRigidTransformError(
            source,
            f"rotation part is not orthonormal: max |R^T R - I| = {ortho_err:.3g} "
            f"(tolerance {atol:g}); scaling or shear is not a rigid motion",
        )
    if abs(det - 1.0) > atol:
        raise NonRigidTransformError(
            source, f"det(R) = {det:.4f}, expected +1" + (" (a reflection)" if det < 0 else "")
        )
    return arr


def read_transform(path: PathLike, *, atol: float = RIGID_ATOL) -> np.ndarray:
    """Read a rigid 4x4 transform ``T_ref_src`` from ``.txt`` (4 rows of 4 numbers, or one
    KITTI 3x4 line), ``.npy`` or ``.json`` (a nested list, or an object with key
    ``"transform"``).

    Returns:
        ``(4, 4) float64``, validated by :func:`validate_transform`.
    """
    path = Path(path)
    suffix = check_file(path, TRANSFORM_FORMATS, "transform")
    try:
        if suffix == ".npy":
            raw = np.load(path, allow_pickle=False)
        elif suffix == ".json":
            with open(path, encoding="utf-8") as handle:
                obj = json.load(handle)
            raw = obj["transform"] if isinstance(obj, dict) and "transform" in obj else obj
        else:
            with open(path, encoding="utf-8") as handle:
                tokens = handle.read().replace(",", " ").split()
            raw = [float(t) for t in tokens]
    except InputError:
        raise
    except Exception as exc:
        raise CorruptFileError(path, f"cannot be read as a {suffix} transform ({exc})") from exc
    return validate_transform(raw, path, atol=atol)


def write_transform(path: PathLike, transform: np.ndarray, *, overwrite: bool = False) -> Path:
    """Write a 4x4 transform atomically as ``.txt`` (4 rows, full precision), ``.npy`` or
    ``.json`` (``{"transform": [[...], ...]}``). The matrix is validated first."""
    path = Path(path)
    suffix = check_suffix(path, TRANSFORM_FORMATS, "transform output")
    matrix = validate_transform(transform, "transform")
    with atomic_output(path, overwrite=overwrite) as tmp:
        if suffix == ".npy":
            with open(tmp, "wb") as handle:
                np.save(handle, matrix)
        elif suffix == ".json":
            tmp.write_text(json.dumps({"transform": matrix.tolist()}, indent=1) + "\n")
        else:
            tmp.write_text("\n".join(" ".join(f"{v:.17g}" for v in row) for row in matrix) + "\n")
    return path
