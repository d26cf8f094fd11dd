"""Rebuild the ONNX Runtime graphs of the shipped networks (:mod:`pcreg.runtime`).

python tools/export_onnx.py                 # every shipped model, into the cache (if missing)
python tools/export_onnx.py indoor --force  # rebuild one even if its export is there

The graphs go where ``pcreg register`` looks for them (``$PCREG_CACHE_DIR``, else
``$XDG_CACHE_HOME/pcreg``, else ``~/.cache/pcreg``; ``onnx/<name>-<weights sha>/``); each is
checked against the torch network before it is kept. ``make setup`` runs this once, so that
the first registration does not pay for the export.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time

from pcreg.registration.shipped import SHIPPED_MODELS, WEIGHTS_DIR


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"default: {' '.join(SHIPPED_MODELS)}")
    parser.add_argument("--force", action="store_true", help="rebuild exports that exist")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from pcreg.registration import onnx_loading as loading

    models = args.models or [m for m in SHIPPED_MODELS if (WEIGHTS_DIR / f"{m}.pt").is_file()]
    for model in models:
        if model not in SHIPPED_MODELS:
            sys.stderr.write(f"export_onnx: error: {model!r} is not a shipped model\n")
            return 2
        folder, _ = loading.export_folder(model)
        if args.force:
            shutil.rmtree(folder, ignore_errors=True)
            folder.with_name(folder.name + ".failed.json").unlink(missing_ok=True)
        start = time.perf_counter()
        with_env = loading.runtime_choice()
        if with_env == "torch":
            sys.stderr.write("export_onnx: error: PCREG_RUNTIME=torch; unset it to export\n")
            return 2
        try:
            loaded = loading.load_onnx_network(model)
        except RuntimeError as err:
            sys.stderr.write(f"export_onnx: error: {err}\n")
            return 1
        if loaded is None:
            sys.stderr.write(f"export_onnx: error: {model}: the export failed (see the log)\n")
            return 1
        size = sum(f.stat().st_size for f in folder.iterdir()) / 2**20
        sys.stdout.write(
            f"{model}: {folder} ({size:.1f} MiB, {time.perf_counter() - start:.1f} s)\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
