"""Which torch device a run may use: the one check that the registration pipeline
(``device=``) and the trainers (``train.device``) share, in the engine so both can import it
(docs/architecture.md, "Import layers")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcreg.errors import InputError

if TYPE_CHECKING:
    import torch

__all__ = ["check_device", "resolve_device"]


def check_device(device: str) -> None:
    """Refuse a torch device this build cannot use (``foo``, ``cuda`` on a CPU build,
    ``cuda:9`` beyond the GPUs present) with an :class:`~pcreg.errors.InputError` whose
    source is ``"device"``. Imports torch only when called, and not for ``"cpu"`` (the ONNX
    Runtime path runs there without torch)."""
    if device == "cpu":
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise InputError("device", f"unknown device {device!r}; use cpu or cuda[:N]") from None
    if dev.type == "cpu":
        return
    if dev.type != "cuda":
        raise InputError("device", f"unsupported device {device!r}; use cpu or cuda[:N]")
    if not torch.cuda.is_available():
        raise InputError("device", f"{device!r}: CUDA is not available to this torch build")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise InputError(
            "device", f"{device!r}: only {torch.cuda.device_count()} CUDA device(s) present"
        )


def resolve_device(name: str) -> torch.device:
    """``auto``: CUDA when this torch sees a GPU, else the CPU; any other name is checked by
    :func:`check_device` and returned as a ``torch.device``."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    check_device(name)
    return torch.device(name)
