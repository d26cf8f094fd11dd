"""What the API takes as a point cloud: a path, an array, a tensor or an Open3D cloud, made one
``(N, 3) float64`` array with the same checks everywhere (:func:`pcreg.register` and the
result's :meth:`~pcreg.registration.result.RegistrationResult.against`, ``errors`` and
``uncertainty``: a newcomer gave them the paths they gave ``register`` and got numpy's
"could not convert string to float")."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from pcreg.io import ReadInfo, read_points, validate_points, xyz_columns

__all__ = ["as_points"]


def as_points(
    cloud: Any, name: str, infos: list | None = None, max_memory: int | str | None = None
) -> np.ndarray:
    """``(N, 3) float64`` from a path, array, tensor or Open3D cloud; errors name ``name``
    (or the file).

    An array or tensor may have more than 3 columns, e.g. a KITTI scan's ``(N, 4)`` x, y, z,
    intensity: the first 3 are the coordinates and the others are ignored, with a note at
    INFO (:func:`pcreg.io.xyz_columns`). Fewer than 3 columns, or not 2-D, is a
    :class:`~pcreg.errors.ShapeError`.

    Invalid points (NaN/Inf coordinates) are dropped, from a file as from an array, with a
    warning that counts them (and says so when most of the cloud is invalid); a cloud with no
    valid point is an :class:`~pcreg.errors.EmptyCloudError`. ``infos``: gets what reading
    did, a :class:`~pcreg.io.ReadInfo` (``dropped_invalid``: the points dropped).
    ``max_memory``: what reading a file may take (bytes or a size such as ``"8G"``; None: the
    reader's 4 GiB)."""
    if isinstance(cloud, (str, os.PathLike)):
        from pcreg.registration.resources import read_cap

        points, info = read_points(cloud, return_info=True, max_memory=read_cap(max_memory))
        if infos is not None:
            infos.append(info)
        return points
    from pcreg.errors import InputError

    if type(cloud).__module__.startswith("torch"):  # a tensor (torch imported lazily)
        if cloud.device.type == "meta":
            raise InputError(name, "is a tensor on the 'meta' device: it holds no values")
        if cloud.is_complex():
            raise InputError(name, f"is a complex tensor ({cloud.dtype}); coordinates are real")
        # bfloat16 / float16 have no numpy twin: widened to float64 first
        cloud = cloud.detach().to("cpu").double().numpy()
    elif hasattr(cloud, "points") and not isinstance(cloud, np.ndarray):  # open3d PointCloud
        cloud = np.asarray(cloud.points)
    if isinstance(cloud, np.ndarray):  # (N, >3): the first 3 columns, noted at INFO
        cloud = xyz_columns(cloud, name)
    points = validate_points(cloud, name, nan_policy="drop")
    if infos is not None:  # valid, so a sequence of len(cloud) rows
        infos.append(ReadInfo(name, len(cloud), dropped_invalid=len(cloud) - len(points)))
    return points
