"""Datasets, the synthetic scan generator, augmentation and batching."""
