"""``python -m pcreg`` (also what ``torchrun -m pcreg`` runs)."""

from pcreg.cli import entry

entry()
