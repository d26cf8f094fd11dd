"""What one registration computes once, however many estimates need it.

``auto`` finishes several estimates on the same two working-frame clouds (the network's, FPFH +
RANSAC's, the network's from that pose, the mirror check's) and runs the network more than once
with the same reference. Inside :func:`once_per_registration`, which the pipeline enters for
each registration (:meth:`pcreg.registration.pipeline.Registration.__call__`), such work is
kept by key (:func:`remembered`) until the registration returns; outside it nothing is kept.

Two kinds of key are used:

* an array's identity, for the pipeline's own working-frame clouds, which are new arrays per
  registration and never written in place (the memo holds the array, so that its id is not
  reused while the registration runs): each cloud voxelised with normals
  (:func:`pcreg.registration.finish._voxelised`);
* an array's content (:func:`content_key`), where the same points reach a step as a new
  array: the reference half of a network pass (its pyramid, backbone features and geometric
  embedding, :class:`pcreg.registration.onnx_network.OnnxRegistrar`), which the cut the
  network is given rebuilds for every pass. One slot per network: a new reference (another
  reading of the units) replaces the last one's, which is dropped before the new one is
  computed (the geometric embedding is ``(M, M, 256)`` float32: 160 MB at 400 superpoints).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import numpy as np

__all__ = ["content_key", "forget", "keep", "once_per_registration", "recalled", "remembered"]

T = TypeVar("T")

#: within one registration: key -> (what the key holds alive, the value)
_MEMO: ContextVar[dict[Hashable, tuple[Any, Any]] | None] = ContextVar("pcreg_memo", default=None)


@contextmanager
def once_per_registration() -> Iterator[None]:
    """Within it, :func:`remembered` keeps what it computes; after it, nothing is kept."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def remembered(key: Hashable, compute: Callable[[], T], holds: Any = None) -> T:
    """``compute()``, once per ``key`` inside :func:`once_per_registration` (every call
    outside it computes). ``holds``: an object the key names by identity (``id(holds)`` in
    the key), kept alive with the value and checked on a hit, so that a recycled id never
    returns another object's value."""
    hit = recalled(key, holds)
    if hit is not None:
        return hit
    value = compute()
    keep(key, value, holds)
    return value


def recalled(key: Hashable, holds: Any = None) -> Any:
    """What :func:`keep` kept under ``key`` in this registration, or None."""
    memo = _MEMO.get()
    hit = None if memo is None else memo.get(key)
    return hit[1] if hit is not None and hit[0] is holds else None


def keep(key: Hashable, value: Any, holds: Any = None) -> None:
    """Keep ``value`` under ``key`` for the rest of this registration (nothing outside
    :func:`once_per_registration`); ``holds`` as for :func:`remembered`."""
    memo = _MEMO.get()
    if memo is not None:
        memo[key] = (holds, value)


def forget(key: Hashable) -> None:
    """Drop what is kept under ``key`` in this registration (nothing where nothing is)."""
    memo = _MEMO.get()
    if memo is not None:
        memo.pop(key, None)


def content_key(points: np.ndarray) -> tuple[tuple[int, ...], str, str]:
    """A key for an array's content: its shape, dtype and a 128-bit BLAKE2b digest of its
    bytes (1-2 ms for a KITTI scan's 120,000 float32 points)."""
    data = np.ascontiguousarray(points)
    digest = hashlib.blake2b(memoryview(data).cast("B"), digest_size=16).hexdigest()
    return data.shape, str(data.dtype), digest
