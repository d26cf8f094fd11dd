"""The memory a pair will need, estimated before anything runs, and the cap it must fit.

The learned path's memory is set by two counts, both cheap to compute from the clouds:

- ``n0``: points left after voxelising at the network's voxel (the backbone's and the fine
  matching's per-point work);
- ``nsp``: superpoints, the points left at the coarsest stage (voxel x 2^(stages-1)); the
  geometric transformer's embeddings and attention are ``(nsp, nsp, ...)``, so memory grows
  with ``nsp**2``. A room in millimetres, or points spread over 1e9 m, keeps every point as a
  superpoint: 19k superpoints would ask for hundreds of GB (the machine's 23 GB ran out).

The estimate is ``base + per_point * (n0_src + n0_ref) + per_pair * max(nsp)**2``, with
coefficients that bound peak resident memory measured on the shipped networks (CPU, torch
2.13, the 3DMatch demo pair and KITTI 00 94/95 scaled x0.5-x4 to vary both counts; ru_maxrss
of a fresh process):

==========  =========  ==========  ===========  ============================================
network     nsp (max)  n0 (pair)   peak (MB)    estimate (MB)
==========  =========  ==========  ===========  ============================================
indoor      115        8.7k        440          457
indoor      805        29.4k       918          1026
indoor      1389       32.8k       1826         2061
outdoor     366        34.7k       628          772
outdoor     946        75.0k       1369         1822
outdoor     2671       135.1k      6884         7725
==========  =========  ==========  ===========  ============================================

A pair over the cap is refused (:class:`MemoryCapError`, exit code 2) with the numbers and
what to do, before the network loads. The cap is ``--max-memory`` / ``max_memory``, by
default :data:`DEFAULT_CAP_BYTES` or 80 % of the memory available now, whichever is less.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import numpy as np

from pcreg._text import sizes_apart
from pcreg.errors import InputError
from pcreg.io_formats._common import MAX_MEMORY_ADVICE
from pcreg.registration.checks import voxel_count

__all__ = [
    "DEFAULT_CAP_BYTES",
    "MemoryCapError",
    "MemoryEstimate",
    "NetworkFootprint",
    "available_memory",
    "check_memory",
    "check_superpoints",
    "default_cap",
    "estimate_memory",
    "footprint_of",
    "parse_size",
    "read_cap",
]

logger = logging.getLogger(__name__)

MB = 1 << 20
#: the default cap of one pair's estimated memory (bytes), unless less is available
DEFAULT_CAP_BYTES = 4 << 30


@dataclass(frozen=True)
class NetworkFootprint:
    """What a network's memory depends on: its voxel (metres), stages, and the measured
    coefficients (bytes) of the estimate."""

    voxel: float
    stages: int
    base: float
    per_point: float
    per_pair: float

    @property
    def coarse_voxel(self) -> float:
        return self.voxel * 2 ** (self.stages - 1)


#: the shipped networks (voxel, stages from their configurations; coefficients fitted above)
SHIPPED_FOOTPRINTS = {
    "indoor": NetworkFootprint(0.05, 4, 420 * MB, 0.003 * MB, 8.0e-4 * MB),
    "outdoor": NetworkFootprint(0.3, 5, 311 * MB, 0.010 * MB, 8.5e-4 * MB),
}


def footprint_of(config, setting: str | None) -> NetworkFootprint:
    """The footprint of a loaded network's configuration: the shipped coefficients of its
    setting, or the larger (outdoor) ones when it names none."""
    known = SHIPPED_FOOTPRINTS.get(setting or "", SHIPPED_FOOTPRINTS["outdoor"])
    return NetworkFootprint(
        float(config.voxel_size), int(config.num_stages), known.base, known.per_point,
        known.per_pair,
    )  # fmt: skip


class MemoryCapError(InputError):
    """The pair's estimated memory exceeds the cap."""


@dataclass(frozen=True)
class MemoryEstimate:
    """The counts behind an estimate and the estimate itself (bytes)."""

    n0: tuple[int, int]
    nsp: tuple[int, int]
    bytes: float

    def describe(self) -> str:
        return (
            f"{self.n0[0]} + {self.n0[1]} points at the network's voxel, up to "
            f"{max(self.nsp)} superpoints per cloud"
        )


def estimate_memory(
    src: np.ndarray, ref: np.ndarray, footprint: NetworkFootprint
) -> MemoryEstimate:
    """Estimate the peak memory (bytes) of the learned path on ``src (N, 3)``, ``ref (M, 3)``."""
    n0 = (voxel_count(src, footprint.voxel), voxel_count(ref, footprint.voxel))
    nsp = (voxel_count(src, footprint.coarse_voxel), voxel_count(ref, footprint.coarse_voxel))
    total = footprint.base + footprint.per_point * sum(n0) + footprint.per_pair * max(nsp) ** 2
    return MemoryEstimate(n0, nsp, float(total))


def available_memory() -> int | None:
    """Bytes of memory available now (``MemAvailable`` of /proc/meminfo), None if unknown."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_cap() -> int:
    """:data:`DEFAULT_CAP_BYTES`, or 80 % of the available memory when that is less."""
    free = available_memory()
    return DEFAULT_CAP_BYTES if free is None else min(DEFAULT_CAP_BYTES, int(0.8 * free))


_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtT]?)(i?[bB])?\s*")
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str | int | float, name: str = "max_memory") -> int:
    """Bytes of a size such as ``"4G"``, ``"512MB"``, ``"1.5GiB"`` or ``2000000000``
    (binary multiples: 1G = 2^30 bytes)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        match = _SIZE.fullmatch(str(text))
        if match is None:
            raise InputError(name, f"not a size: {text!r} (e.g. 4G, 512M, 2000000000)")
        value, unit = float(match.group(1)), match.group(2).upper()
    size = value * _UNITS[unit]
    if not (np.isfinite(size) and size > 0):
        raise InputError(name, f"must be a positive size, got {text!r}")
    if size < 1:  # 0.5, 1e-3, "1b" / 2: no byte at all
        raise InputError(name, f"must be at least 1 byte, got {text!r}")
    return int(size)


def read_cap(max_memory: str | int | float | None, name: str = "max_memory") -> int | None:
    """The ``max_memory`` of :func:`pcreg.io.read_points` for a pair's cap (bytes, or a size
    such as ``"8G"``): the same number of bytes, or None (the reader's own default) for
    None. One cap covers the reading and the registration of each cloud."""
    return None if max_memory is None else parse_size(max_memory, name)


#: fewest superpoints per cloud the learned path is run with. Measured with the shipped
#: networks on shrunken real pairs: the 3DMatch demo pair x0.2 / x0.3 (4-10 superpoints) came
#: out 156 / 175 deg wrong and KITTI 94/95 x0.01 (9-10) 0.95 deg and 2.7 cm off at 1.6 m;
#: x0.5 (22-28 superpoints) and x0.02 (25-26) were right (1.4 / 0.3 deg).
MIN_SUPERPOINTS = 16


def check_superpoints(
    estimate: MemoryEstimate, footprint: NetworkFootprint, names: tuple[str, str]
) -> None:
    """Refuse a cloud too small for the network: fewer than :data:`MIN_SUPERPOINTS` at its
    superpoint voxel.

    Raises:
        TooFewPointsError"""
    from pcreg.registration.checks import TooFewPointsError

    for n, name in zip(estimate.nsp, names, strict=True):
        if n < MIN_SUPERPOINTS:
            raise TooFewPointsError(
                name,
                f"too small for the network: {n} superpoints at its {footprint.coarse_voxel:g} "
                f"m superpoint voxel, at least {MIN_SUPERPOINTS} are needed (are the "
                "coordinates in metres? --method fpfh-ransac with a smaller --voxel-size "
                "registers small objects)",
            )


def check_memory(
    estimate: MemoryEstimate, cap: int, names: tuple[str, str] = ("src", "ref")
) -> None:
    """Refuse a pair whose estimate exceeds ``cap`` bytes.

    Raises:
        MemoryCapError: with the numbers and what to do."""
    logger.debug("memory estimate %.0f MB (%s), cap %.0f MB", estimate.bytes / MB,
                 estimate.describe(), cap / MB)  # fmt: skip
    if estimate.bytes > cap:
        need_text, cap_text = sizes_apart(estimate.bytes, cap)
        raise MemoryCapError(
            f"{names[0]} / {names[1]}",
            f"needs about {need_text} ({estimate.describe()}), over the {cap_text} cap: "
            "are the coordinates in metres? Otherwise crop or thin the clouds, or raise "
            f"{MAX_MEMORY_ADVICE}",
        )
