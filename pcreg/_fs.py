"""Atomic file output: write to a temporary file beside the target, fsync, then rename.

A reader (or a crash) therefore sees either the old file or the complete new one, never a
half-written file, and an existing file is only replaced when the caller asks for it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pcreg.errors import OutputExistsError, UnwritableOutputError

__all__ = ["atomic_output", "check_writable"]


def check_writable(path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Check that ``path`` can be created (or replaced when ``overwrite``) before doing work.

    Raises:
        OutputExistsError: the file exists and ``overwrite`` is False.
        UnwritableOutputError: the directory is missing or not writable, or ``path`` is a directory.
    """
    path = Path(path)
    if path.is_dir():
        raise UnwritableOutputError(path, "is a directory, expected a file path")
    if path.exists() and not overwrite:
        raise OutputExistsError(path, "already exists (pass force/overwrite to replace it)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UnwritableOutputError(path, f"directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UnwritableOutputError(
            path, f"cannot create files in {str(parent)!r} (directory is not writable)"
        )
    # access() says yes to root everywhere and knows nothing of read-only or pseudo file
    # systems: create (and remove) a probe file, the way the real write will start.
    _make_temp(path).unlink()
    return path


def _make_temp(path: Path) -> Path:
    """An empty temporary file beside ``path`` (same suffix), or UnwritableOutputError."""
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=f".tmp{path.suffix}", dir=path.parent or "."
        )
    except OSError as err:
        raise UnwritableOutputError(
            path, f"cannot create files in {str(path.parent or '.')!r} ({err.strerror})"
        ) from None
    os.close(fd)
    return Path(tmp_name)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary path in the target's directory; on success move it onto ``path``.

    The temporary file keeps the target's suffix so that writers which dispatch on the
    extension (Open3D) still work. On any exception the temporary file is removed and the
    target is left untouched.

    Example:
        >>> with atomic_output("out.npy") as tmp:   # doctest: +SKIP
        ...     np.save(tmp, array)
    """
    path = check_writable(path, overwrite=overwrite)
    tmp = _make_temp(path)
    # mkstemp creates 0600 files; give the output the mode any other new file would get.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        if not overwrite and path.exists():
            raise OutputExistsError(path, "appeared while writing; not replaced")
        os.replace(tmp, path)
        with contextlib.suppress(OSError):  # directory fsync is best effort (not on all FS)
            dir_fd = os.open(path.parent or ".", os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    finally:
        if tmp.exists():
            tmp.unlink()
