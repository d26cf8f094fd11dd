"""Procedural indoor rooms and outdoor streets, scanned by simulated sensors, for training and
validating registration models where the benchmark data cannot be downloaded.

Everything is deterministic by seed (``numpy.random.Generator``)."""

from pcreg.data.synthetic.pairs import (
    SyntheticPair,
    indoor_pairs,
    outdoor_pairs,
    overlap_ratio,
)

__all__ = ["SyntheticPair", "indoor_pairs", "outdoor_pairs", "overlap_ratio"]
