"""Benchmarks whose results go into BENCHMARKS.md (median of repeated runs, ratios against a
reference measured in the same run). Run them with ``pcreg benchmark``."""
