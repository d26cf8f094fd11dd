"""numpy's BLAS kept single-threaded while the registration path runs.

numpy's OpenBLAS splits even small matrix products over its own worker threads, and those
threads then busy-wait for more work (OpenBLAS' thread timeout) on the very cores torch's
OpenMP threads need next. The registration path does such products between torch calls: the
``(N, 3) @ (3, 3)`` rotations of clouds and the Manhattan frame's normal votes. Measured on the
2-core AMD EPYC VM (the real 3DMatch pair 0<-5): the cube ranking that follows the frames
took 75-140 ms inside a registration against 34 ms with BLAS held to one thread, and the
products themselves are far too small to gain from a second thread. The limit applies only
inside the decorated calls (threadpoolctl restores the caller's setting on the way out).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from threadpoolctl import threadpool_limits

__all__ = ["single_threaded_blas"]

F = TypeVar("F", bound=Callable)


def single_threaded_blas(func: F) -> F:
    """Decorator: run ``func`` with every loaded BLAS (numpy's, scipy's) limited to one
    thread; torch's own thread pool is untouched."""
    return threadpool_limits.wrap(limits=1, user_api="blas")(func)
