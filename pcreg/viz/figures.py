"""Saving a matplotlib figure: one place for how every picture of the package is written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pcreg._fs import atomic_output

__all__ = ["save_figure"]


def save_figure(
    fig: Any, path: str | os.PathLike[str], *, dpi: int = 100, overwrite: bool = False
) -> Path:
    """Write ``fig`` (a matplotlib ``Figure``) to ``path`` as a PNG at ``dpi``, atomically (a
    temporary file beside it, then a rename; an existing file is refused unless
    ``overwrite``), and close it. Returns ``path``."""
    import matplotlib.pyplot as plt

    try:
        with atomic_output(path, overwrite=overwrite) as tmp:
            fig.savefig(tmp, dpi=dpi, format="png")
    finally:
        plt.close(fig)
    return Path(path)
