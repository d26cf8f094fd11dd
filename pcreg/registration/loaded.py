"""A network ready to run with what its checkpoint says about using it (torch-free: the
torch :class:`~pcreg.registration.network.Registrar` and the ONNX Runtime
:class:`~pcreg.registration.onnx_network.OnnxRegistrar` both fit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pcreg.config import SearchConfig

if TYPE_CHECKING:
    from pcreg.registration.network import Registrar
    from pcreg.registration.onnx_network import OnnxRegistrar

__all__ = ["LoadedNetwork", "load_for_registration"]


@dataclass
class LoadedNetwork:
    """A network ready to run, with what its checkpoint says about using it.

    network: the :class:`Registrar`. search: its default :class:`SearchConfig`. name: the
    shipped name or the checkpoint path. setting: ``"indoor"`` / ``"outdoor"`` when the
    checkpoint or the shipped name says so, else None (the pipeline then decides).
    """

    network: Registrar | OnnxRegistrar
    search: SearchConfig
    name: str
    setting: str | None = None


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
    from pcreg.registration.loading import load_network

    return load_network(model, device)
