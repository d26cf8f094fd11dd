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

__all__ = ["LoadedNetwork"]


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
