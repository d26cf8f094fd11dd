"""Which runtime a registration's network runs on: ONNX Runtime for a shipped network on the
CPU (no torch), torch for everything else."""

from __future__ import annotations

from pcreg.registration.loaded import LoadedNetwork

__all__ = ["NetworkCache", "libraries", "load_for_registration"]


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


class NetworkCache:
    """The default loader, each network read once per pipeline (a pipeline registers many
    pairs with the same weights): :func:`~pcreg.registration.networks.load_for_registration`
    (ONNX Runtime for a shipped network on the CPU, else torch)."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, str], LoadedNetwork] = {}

    def __call__(self, model: str, device: str) -> LoadedNetwork:
        key = (model, device)
        if key not in self._loaded:
            self._loaded[key] = load_for_registration(model, device)
        return self._loaded[key]


def libraries(method: str, model: str | None, device: str) -> tuple[str, ...]:
    """The libraries a registration's threads are fitted in (imported first, so that they
    are set before it runs): Open3D for FPFH + RANSAC alone; torch for a network that runs on
    it (a checkpoint, a GPU, ``PCREG_RUNTIME=torch``); none for a shipped network on ONNX
    Runtime, whose sessions run one thread each (:mod:`pcreg.runtime`)."""
    if method == "fpfh-ransac":
        return ("open3d",)
    from pcreg.registration.onnx_loading import runtime_choice
    from pcreg.registration.shipped import SHIPPED_MODELS

    if (
        device == "cpu"
        and runtime_choice() != "torch"
        and (model is None or model in SHIPPED_MODELS)
    ):
        return ()
    return ("torch",)
