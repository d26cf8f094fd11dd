"""pcreg: learned 3-D point-cloud registration (GeoTransformer-style), on CPU or GPU.

>>> import pcreg                                                   # doctest: +SKIP
>>> result = pcreg.register("src.ply", "ref.ply", model="indoor")  # doctest: +SKIP
>>> result.transform                                               # doctest: +SKIP

:func:`register` returns a :class:`RegistrationResult`; :func:`load_model` gives the registration
pipeline bound to a shipped ``"indoor"`` / ``"outdoor"`` network (or any checkpoint) for repeated
use: ``pipe = pcreg.load_model("indoor"); pipe(src, ref)``. :func:`map` places many scans in
one frame over a pose graph: ``pcreg.map("scans/", out="map/").poses``.
"""

import logging

__version__ = "0.1.0"
__all__ = ["RegistrationResult", "__version__", "load_model", "map", "register"]

logging.getLogger(__name__).addHandler(logging.NullHandler())


def __getattr__(name: str):  # lazy: `import pcreg` stays light (no torch until needed)
    if name in {"register", "RegistrationResult", "load_model", "map"}:
        from pcreg import api

        return getattr(api, name)
    raise AttributeError(f"module 'pcreg' has no attribute {name!r}")
