"""Registering many pairs (floor 3 of docs/architecture.md): manifests, a resumable results
log, and the Ray runner that spreads the one registration pipeline over a machine or a
cluster. ``pcreg batch``, ``pcreg odometry``, ``pcreg evaluate workers=N`` and the pipeline
benchmark's throughput all run on :class:`~pcreg.batch.runner.RayRunner`."""
