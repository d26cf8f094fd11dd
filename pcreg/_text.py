"""Numbers in messages: a value and the limit it missed, written so that they read apart.

A refusal that says "best score 0.30 < 0.30" or "needs 3.0 MiB, over the 3.0 MiB cap" reads as
a bug. :func:`apart` and :func:`sizes_apart` add decimals until the two differ.
"""

from __future__ import annotations

import math

__all__ = ["apart", "format_length", "size_text", "sizes_apart"]

#: the most decimals :func:`apart` adds before it falls back to ``repr``
MOST_DIGITS = 6


def apart(value: float, limit: float, digits: int = 2, percent: bool = False) -> tuple[str, str]:
    """``value`` and ``limit`` with ``digits`` decimals (as percentages with ``percent``), or
    with as many more as it takes (up to :data:`MOST_DIGITS`) for the two to read
    differently; two numbers that still read alike are written with ``repr``. Equal
    numbers (or a NaN) keep ``digits``."""
    kind = "%" if percent else "f"
    if value == limit or value != value or limit != limit:  # equal, or NaN: nothing to part
        return f"{value:.{digits}{kind}}", f"{limit:.{digits}{kind}}"
    for d in range(digits, MOST_DIGITS + 1):
        pair = f"{value:.{d}{kind}}", f"{limit:.{d}{kind}}"
        if pair[0] != pair[1]:
            return pair
    if percent:
        return f"{value!r} (as a share)", f"{limit!r} (as a share)"
    return repr(value), repr(limit)


_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def _unit(nbytes: float) -> tuple[str, int]:
    return next(((u, s) for u, s in _UNITS if nbytes >= s), _UNITS[-1])


def size_text(nbytes: float) -> str:
    """``nbytes`` in GiB, MiB or KiB, whichever it reaches, one decimal; a value that rounds
    up to 1024 of a unit in the next one (1 MiB less a byte is "1.0 MiB", not "1024.0
    KiB")."""
    unit, size = _unit(nbytes)
    if f"{nbytes / size:.1f}" == "1024.0" and unit != _UNITS[0][0]:
        unit, size = _UNITS[[u for u, _ in _UNITS].index(unit) - 1]
    return f"{nbytes / size:.1f} {unit}"


def sizes_apart(need: float, cap: float) -> tuple[str, str]:
    """A size in bytes and the cap it exceeds, with one decimal, each in its own unit (GiB,
    MiB or KiB); two sizes within a factor 2 of each other both in the larger's unit (1.0 GiB
    against 1024.0 MiB would read alike), with as many more decimals (up to 4) as tell them
    apart, else both in whole bytes, the larger rounded up."""
    if not max(need, cap) < 2 * min(need, cap):
        return size_text(need), size_text(cap)
    unit, size = _unit(max(need, cap))
    for d in range(1, 5):
        pair = f"{need / size:.{d}f} {unit}", f"{cap / size:.{d}f} {unit}"
        if pair[0] != pair[1]:
            return pair
    up, down = (math.ceil, math.floor) if need >= cap else (math.floor, math.ceil)
    return f"{up(need)} bytes", f"{down(cap)} bytes"  # a fraction of a byte over: still apart


def format_length(metres: float, digits: int = 3) -> str:
    """``metres`` with the unit a person reads: ``0.0042 -> "4.2 mm"``, ``0.123 -> "12.3 cm"``,
    ``3.5 -> "3.5 m"``, ``1886939.8 -> "1887 km"``; ``digits`` significant digits at most (the
    integer part is kept whole). Non-finite values read ``"inf m"`` / ``"nan m"``."""
    if not math.isfinite(metres):
        return f"{metres} m"
    size = abs(metres)
    units = ((1e3, "mm", 0.01), (1e2, "cm", 1.0), (1.0, "m", 1e3), (1e-3, "km", math.inf))
    scale, unit = next((scale, unit) for scale, unit, below in units if size < below)
    value = metres * scale
    whole = len(str(int(abs(value)))) if abs(value) >= 1 else 1
    decimals = max(0, digits - whole)
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text} {unit}"
