"""pcreg: learned 3-D point-cloud registration (GeoTransformer-style), on CPU or GPU.

The registration API (``register``, ``load_model``) arrives with the network; the foundation
modules are importable now: :mod:`pcreg.io`, :mod:`pcreg.ops`, :mod:`pcreg.geometry`.
"""

import logging

__version__ = "0.1.0"
__all__ = ["__version__"]

logging.getLogger(__name__).addHandler(logging.NullHandler())
