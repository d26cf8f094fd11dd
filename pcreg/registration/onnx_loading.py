"""The shipped networks on ONNX Runtime: where their exported graphs are kept, and the export on
first use.

An export lives in ``<cache>/onnx/<name>-<sha>/`` (``<cache>``: ``$PCREG_CACHE_DIR``, else
``$XDG_CACHE_HOME/pcreg``, else ``~/.cache/pcreg``; ``<sha>``: the first 16 hex digits of the
SHA-256 of the weights file, so new weights never meet old graphs). ``manifest.json`` holds
what the graphs need beside them: the architecture, the default search settings, the optimal
transport's learned dustbin score, and the check the export passed.

The first use of a shipped name exports its graphs (this needs torch, once) and checks them
against the torch network on a generated pair before keeping them: the transforms must agree
within :data:`EXPORT_TOLERANCE`. Where that cannot happen (no onnxruntime, an unwritable cache,
a failed check) the torch path runs instead, with one log line saying why. ``PCREG_RUNTIME``
chooses: ``auto`` (the default: ONNX Runtime for shipped names), ``onnx`` (the same, but a
failure is an error), ``torch``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from pcreg.config import SearchConfig
from pcreg.registration.loaded import LoadedNetwork
from pcreg.registration.shipped import SHIPPED_MODELS, weights_path

__all__ = [
    "EXPORT_TOLERANCE",
    "MANIFEST_FORMAT",
    "RUNTIMES",
    "cache_root",
    "export_folder",
    "graph_files",
    "load_onnx_network",
    "runtime_choice",
]

logger = logging.getLogger(__name__)

#: the runtimes ``PCREG_RUNTIME`` may name
RUNTIMES = ("auto", "onnx", "torch")
#: version of ``manifest.json``'s layout; an export of another version is rebuilt
MANIFEST_FORMAT = 3
#: largest entry-wise difference of the 4x4 transforms allowed between the export and the
#: torch network on the check pair (rotation entries and metres)
EXPORT_TOLERANCE = 1e-4


def runtime_choice() -> str:
    """``PCREG_RUNTIME`` (``auto`` when unset).

    Raises:
        InputError: a value not in :data:`RUNTIMES`."""
    from pcreg.errors import InputError

    value = os.environ.get("PCREG_RUNTIME", "auto").strip().lower() or "auto"
    if value not in RUNTIMES:
        raise InputError("PCREG_RUNTIME", f"is {value!r}; use one of {', '.join(RUNTIMES)}")
    return value


def cache_root() -> Path:
    """The folder pcreg keeps derived files in (see the module docstring)."""
    if os.environ.get("PCREG_CACHE_DIR"):
        return Path(os.environ["PCREG_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = Path.home() / ".cache"
        except (KeyError, RuntimeError):  # no HOME and no passwd entry
            base = Path(tempfile.gettempdir()) / f"pcreg-cache-{os.getuid()}"
    return Path(base) / "pcreg"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export_folder(model: str) -> tuple[Path, str]:
    """``(folder, sha256)`` of a shipped model's export (the folder may not exist yet)."""
    path = weights_path(model)
    sha = _sha256(path)
    return cache_root() / "onnx" / f"{model}-{sha[:16]}", sha


def graph_files(folder: Path, manifest: dict) -> dict[str, Path]:
    """Graph name -> its file in an export ``folder``."""
    return {name: folder / file for name, file in manifest["graphs"].items()}


#: the sources an export is made from (relative to the package): a change to any of them
#: makes the cached graphs stale
_EXPORTED_SOURCES = (
    "models/geotransformer/*.py",
    "models/backbones/kpconv/*.py",
    "layers/*.py",
    "registration/onnx_export.py",
    "registration/onnx_network.py",
    "config.py",
)


def code_digest() -> str:
    """SHA-256 (16 hex digits) of the sources the graphs and their manifest come from
    (:data:`_EXPORTED_SOURCES`), so that an export made by other code is never used: ~1 ms."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for pattern in _EXPORTED_SOURCES:
        for path in sorted(root.glob(pattern)):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _versions() -> dict:
    """What an export must match to be used: its layout, this code, this onnxruntime."""
    import onnxruntime

    return {
        "format": MANIFEST_FORMAT,
        "code": code_digest(),
        "onnxruntime": onnxruntime.__version__,
    }


def _read_manifest(folder: Path, sha: str) -> dict | None:
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("weights_sha256") != sha:
        return None
    if any(manifest.get(k) != v for k, v in _versions().items()):  # stale: other code/runtime
        return None
    if not all((folder / f).is_file() for f in manifest.get("graphs", {}).values()):
        return None
    return manifest


def load_onnx_network(model: str, threads: int = 1) -> LoadedNetwork | None:
    """A shipped model on ONNX Runtime, exporting it on first use; None where the torch path
    must run instead (not a shipped name, ``PCREG_RUNTIME=torch``, or ``auto`` and the export
    unavailable: no onnxruntime, an unwritable cache, a failed check).

    Raises:
        RuntimeError: ``PCREG_RUNTIME=onnx`` and the export is unavailable."""
    choice = runtime_choice()
    if choice == "torch" or model not in SHIPPED_MODELS:
        return None
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return _unavailable(choice, model, "onnxruntime is not installed")
    folder, sha = export_folder(model)
    manifest = _read_manifest(folder, sha)
    if manifest is None:
        failed = _failure(folder, sha)
        if failed is not None:  # not retried on every run: tools/export_onnx.py --force does
            return _unavailable(choice, model, f"an earlier export failed ({failed}); "
                                "`python tools/export_onnx.py --force` retries it")  # fmt: skip
        try:
            manifest = _export(model, folder, sha)
        except Exception as err:
            why = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            _record_failure(folder, sha, why)
            return _unavailable(choice, model, f"export failed ({why})")
    try:
        return _open(model, folder, manifest, threads)
    except Exception as err:
        shutil.rmtree(folder, ignore_errors=True)
        return _unavailable(choice, model, f"its export could not be opened ({err})")


def _open(model: str, folder: Path, manifest: dict, threads: int) -> LoadedNetwork:
    """The network of an export, its graphs opened (all but the rarely used log-domain
    Sinkhorn) so that a corrupt file shows here, not inside a registration."""
    import dataclasses

    from pcreg.registration.onnx_network import OnnxRegistrar

    def torch_model():
        from pcreg.registration.loading import load_network

        return load_network(model).network.model

    network = OnnxRegistrar(manifest, graph_files(folder, manifest), threads, torch_model)
    for graph in ("backbone", "embedding", "transformer", "sinkhorn_scaling"):
        network.graphs[graph]
    fields = {f.name for f in dataclasses.fields(SearchConfig)}
    search = SearchConfig(**{k: v for k, v in manifest["search"].items() if k in fields})
    return LoadedNetwork(network, search, model, manifest["setting"])


def _failure_path(folder: Path) -> Path:
    return folder.with_name(folder.name + ".failed.json")


def _failure(folder: Path, sha: str) -> str | None:
    """Why the last export of these weights with this code and onnxruntime failed, if it did."""
    try:
        record = json.loads(_failure_path(folder).read_text())
    except (OSError, ValueError):
        return None
    if record.get("weights_sha256") != sha or any(
        record.get(k) != v for k, v in _versions().items()
    ):
        return None
    return str(record.get("reason", "unknown"))


def _record_failure(folder: Path, sha: str, reason: str) -> None:
    with contextlib.suppress(OSError):
        folder.parent.mkdir(parents=True, exist_ok=True)
        _failure_path(folder).write_text(
            json.dumps({**_versions(), "weights_sha256": sha, "reason": reason}) + "\n"
        )


def _unavailable(choice: str, model: str, why: str) -> None:
    if choice == "onnx":
        raise RuntimeError(f"PCREG_RUNTIME=onnx, but the {model!r} network cannot run on it: {why}")
    logger.warning("the %r network runs on torch: %s", model, why)
    return None


def _export(model: str, folder: Path, sha: str) -> dict:
    """Export, check and publish one shipped model's graphs (atomically: a temporary folder
    renamed into place; a concurrent export that finished first is kept)."""
    import dataclasses

    from pcreg.registration.loading import load_network
    from pcreg.registration.onnx_export import OPSET, export_graphs, optimise_graphs

    # one line on stderr: the first registration would otherwise wait ~10 s in silence
    logger.warning("preparing the %r network for ONNX Runtime: a one-time export into %s "
                   "(about 10 s)", model, folder)  # fmt: skip
    folder.parent.mkdir(parents=True, exist_ok=True)  # unwritable: fails before torch loads
    _remove_leftovers(folder)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        loaded = load_network(model)
        graphs = optimise_graphs(tmp, export_graphs(loaded.network.model, tmp))
        tmp.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache from its other users
        import torch

        manifest = {
            "model": model,
            "weights_sha256": sha,
            "config": dataclasses.asdict(loaded.network.config),
            "search": dataclasses.asdict(loaded.search),
            "setting": loaded.setting,
            "alpha": float(loaded.network.model.matcher.optimal_transport.alpha.detach()),
            "graphs": graphs,
            "opset": OPSET,
            "torch": torch.__version__,
            **_versions(),
        }
        manifest["check"] = _check(loaded, tmp, manifest)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        try:
            os.replace(tmp, folder)
        except OSError:
            if _read_manifest(folder, sha) is not None:  # a concurrent export finished first
                return _read_manifest(folder, sha)
            # a stale export (other code, another onnxruntime) or a broken one: moved aside
            # (one rename, so a reader never sees half of either) and replaced
            aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.stale.", dir=folder.parent))
            os.replace(folder, aside / "old")
            shutil.rmtree(aside, ignore_errors=True)
            os.replace(tmp, folder)
        _failure_path(folder).unlink(missing_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def _remove_leftovers(folder: Path, age_s: float = 3600.0) -> None:
    """Temporary folders of exports that died over ``age_s`` seconds ago (a live export's is
    younger)."""
    import time

    for path in folder.parent.glob(f".{folder.name}.*"):
        with contextlib.suppress(OSError):
            if time.time() - path.stat().st_mtime > age_s:
                shutil.rmtree(path, ignore_errors=True)


def _check(loaded: LoadedNetwork, folder: Path, manifest: dict) -> dict:
    """Both runtimes on a generated pair (a room-sized cloud of boxes at the network's scale
    and a rigid motion of it): the largest transform difference, or ValueError over
    :data:`EXPORT_TOLERANCE`."""
    from pcreg.registration.onnx_network import OnnxRegistrar

    cfg = loaded.network.config
    rng = np.random.default_rng(7)
    scale = cfg.voxel_size / 0.05
    corners = rng.random((12, 3)) * 3.0 * scale
    sizes = (0.3 + rng.random((12, 3))) * scale
    ref = np.concatenate(
        [c + rng.random((500, 3)) * s for c, s in zip(corners, sizes, strict=True)]
    )
    angle = np.radians(10.0)
    rot = np.array(
        [[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]]
    )
    src = (ref - 0.2 * scale) @ rot
    torch_pred = loaded.network(src, ref)
    onnx_pred = OnnxRegistrar(manifest, graph_files(folder, manifest))(src, ref)
    diff = float(np.abs(torch_pred.transform - onnx_pred.transform).max())
    if not diff <= EXPORT_TOLERANCE:
        raise ValueError(f"the export differs from the torch network by {diff:.2e}")
    return {"pair": "generated boxes, seed 7", "max_transform_difference": diff}
