"""``python -m pcreg`` (also what ``torchrun -m pcreg`` runs)."""

import sys

from pcreg.cli import main

sys.exit(main())
