"""The registration pipeline (floor 2 of docs/architecture.md): validation and the setting ->
orientation search over the network -> optional ICP -> :class:`RegistrationResult`, with one
argument order, ``(src, ref)``, throughout."""

import importlib

_EXPORTS = {
    "LoadedNetwork": "loading",
    "load_network": "loading",
    "weights_path": "loading",
    "Prediction": "prediction",
    "Registrar": "network",
    "METHODS": "pipeline",
    "Registration": "pipeline",
    "TooFewPointsError": "pipeline",
    "cloud_extent": "pipeline",
    "SETTINGS": "result",
    "RegistrationResult": "result",
    "Setting": "result",
    "OrientationSearch": "search",
    "SearchConfig": "search",
}

__all__ = [
    "METHODS",
    "SETTINGS",
    "LoadedNetwork",
    "OrientationSearch",
    "Prediction",
    "Registrar",
    "Registration",
    "RegistrationResult",
    "SearchConfig",
    "Setting",
    "TooFewPointsError",
    "cloud_extent",
    "load_network",
    "weights_path",
]


def __getattr__(name: str):  # lazy: torch loads with the first network, not on import
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"pcreg.registration.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'pcreg.registration' has no attribute {name!r}")
