"""Compose a Hydra config from the package's ``configs/`` and command-line overrides.

This is the only module (with the CLI that calls it) that imports Hydra (DESIGN §3).
The YAML files ship inside the package (``pcreg/configs``) so ``pcreg vit train`` works after a
plain ``pip install``, not only from a source checkout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pcreg.config import ConfigError

CONFIG_DIR = Path(__file__).resolve().parent / "configs"


def compose(config_name: str, overrides: list[str]) -> dict[str, Any]:
    """Return the composed config as a plain dict; bad overrides raise :class:`ConfigError`."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_dir(str(CONFIG_DIR), version_base="1.3", job_name="pcreg"):
            cfg = hydra_compose(config_name=config_name, overrides=list(overrides))
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except (HydraException, OmegaConfBaseException) as err:
        text = str(err) if err.__cause__ is None else f"{err} {err.__cause__}"
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        message = " ".join(ln for ln in lines if not ln.startswith("full_key"))
        raise ConfigError(f"{config_name} {' '.join(overrides)}".strip(), message) from None
