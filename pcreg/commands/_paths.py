"""Default locations shared by the subcommands."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_SHARED_DATA"]

#: ``../shared/data`` beside a source checkout; $PCREG_SHARED_DATA overrides it.
DEFAULT_SHARED_DATA = Path(
    os.environ.get(
        "PCREG_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"
    )
)
