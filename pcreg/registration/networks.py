"""Which runtime a registration's network runs on: ONNX Runtime for a shipped network on the
CPU (no torch), torch for everything else."""

from __future__ import annotations

from pcreg.registration.loaded import LoadedNetwork

__all__ = ["load_for_registration"]


def load_for_registration(model: str, device: str = "cpu") -> LoadedNetwork:
    """The network a registration runs for ``model`` on ``device``: a shipped network on the
    CPU runs on ONNX Runtime without torch (:func:`~pcreg.registration.onnx_loading.
    load_onnx_network`), anything else, or where that is unavailable, on torch
    (:func:`~pcreg.registration.loading.load_network`)."""
    if device == "cpu":
        from pcreg.registration.onnx_loading import load_onnx_network

        loaded = load_onnx_network(model)
        if loaded is not None:
            return loaded
    from pcreg.engine.threads import fit_late
    from pcreg.registration.loading import load_network

    loaded = load_network(model, device)
    fit_late()  # torch was imported inside the registration's fitted_threads
    return loaded
