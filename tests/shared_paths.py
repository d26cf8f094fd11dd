"""Where the tests find the repository and ``../shared/data`` (or ``$PCREG_SHARED_DATA``).

A module of its own, not ``conftest``: ``from conftest import ...`` gets whichever
``conftest`` module pytest imported first, and with ``tests/engine`` collected beside
``tests/registration`` that was ``tests/engine/conftest.py``, which defines neither name."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PCREG_SHARED_DATA", REPO.parent / "shared" / "data"))
