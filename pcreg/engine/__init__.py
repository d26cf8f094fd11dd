"""Training, evaluation, checkpoints and inference plumbing shared by every model."""
