"""Exception types for bad user input.

Every error a user can cause by handing pcreg a bad file, array or transform is an
:class:`InputError` (a ``ValueError``). Its message starts with the offending file (or the
argument name when there is no file) followed by the problem, so the command line can print it
as one line and exit with status 2. The subclasses let callers and tests tell the problems apart.
"""

from __future__ import annotations

import os

__all__ = [
    "CorruptFileError",
    "EmptyCloudError",
    "InputError",
    "MissingFileError",
    "NonFiniteError",
    "NonRigidTransformError",
    "NotRegisteredError",
    "OutputExistsError",
    "PairsFailedError",
    "ShapeError",
    "UnknownFormatError",
    "UnwritableOutputError",
]


class InputError(ValueError):
    """A problem with user input. ``str(err)`` is ``"<source>: <problem>"``.

    Args:
        source: the file path, or a name such as ``"src"`` for in-memory input.
        problem: what is wrong, in words a user can act on.
    """

    def __init__(self, source: str | os.PathLike[str], problem: str) -> None:
        self.source = os.fspath(source)
        self.problem = problem
        super().__init__(f"{self.source}: {problem}")


class MissingFileError(InputError, FileNotFoundError):
    """The input file does not exist (or is not a regular file)."""


class UnknownFormatError(InputError):
    """The file extension is not one pcreg can read or write."""


class CorruptFileError(InputError):
    """The file exists but its content cannot be parsed in the format its extension claims."""


class EmptyCloudError(InputError):
    """The point cloud holds no points (after any NaN/Inf dropping)."""


class NonFiniteError(InputError):
    """Coordinates or transform entries contain NaN or Inf."""


class ShapeError(InputError):
    """An array has the wrong number of dimensions or columns."""


class NonRigidTransformError(InputError):
    """A 4x4 matrix is not a rigid motion: R^T R != I, det(R) != +1 or bottom row != [0 0 0 1]."""


class OutputExistsError(InputError, FileExistsError):
    """The output path exists and overwriting was not requested."""


class UnwritableOutputError(InputError, PermissionError):
    """The output path cannot be written (missing directory, permissions, read-only)."""


class NotRegisteredError(RuntimeError):
    """A registration ran on valid input but found no supported estimate (the command line's
    exit code 3). ``str(err)`` is ``"<source>: not registered: <reason>"``."""

    def __init__(self, source: str | os.PathLike[str], reason: str) -> None:
        self.source = os.fspath(source)
        self.reason = reason
        super().__init__(f"{self.source}: not registered: {reason}")


class PairsFailedError(RuntimeError):
    """A run over many pairs (``pcreg batch``) finished, but some pairs failed: an error, no
    result (the command line's exit code 4; the other pairs' results are written).
    ``str(err)`` is ``"<manifest>: <failed> of <pairs> pairs failed, the first <id>: <error>
    (...)"``."""

    def __init__(self, manifest: str | os.PathLike[str], failed: int, pairs: int,
                 first: str, log: str | os.PathLike[str]) -> None:  # fmt: skip
        self.manifest, self.failed, self.pairs = os.fspath(manifest), failed, pairs
        super().__init__(
            f"{self.manifest}: {failed} of {pairs} pairs failed, the first {first} (every "
            f"error: {os.fspath(log)}; the same command without --force retries them)"
        )
