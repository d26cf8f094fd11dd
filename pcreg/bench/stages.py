"""Where a network's time goes inside one registration: wall time added up per stage, for the
torch network (forward hooks on its submodules) and for the ONNX Runtime one (its step methods
wrapped on the instance). :mod:`pcreg.bench.pipeline` splits its median call with them."""

from __future__ import annotations

import threading
import time
from typing import ClassVar

__all__ = ["MethodTimer", "ModuleTimer"]


class ModuleTimer:
    """Forward hooks that add up the wall time of named submodules."""

    def __init__(self, modules: dict) -> None:
        self.total = dict.fromkeys(modules, 0.0)
        self._start: dict[str, float] = {}
        for name, module in modules.items():
            module.register_forward_pre_hook(self._pre(name))
            module.register_forward_hook(self._post(name))

    def _pre(self, name):
        def hook(*_):
            self._start[name] = time.perf_counter()

        return hook

    def _post(self, name):
        def hook(*_):
            self.total[name] += time.perf_counter() - self._start[name]

        return hook

    def reset(self) -> None:
        self.total = dict.fromkeys(self.total, 0.0)


class MethodTimer:
    """The same totals for the ONNX Runtime network (:class:`~pcreg.registration.onnx_network.
    OnnxRegistrar`), from its step methods wrapped on the instance: ``forward`` (backbone,
    embeddings and everything after them), ``backbone``, ``transformer`` (with the
    embeddings), ``optimal_transport``. Times add up over both lanes where two run at once."""

    STEPS: ClassVar[dict[str, str]] = {
        "backbone": "_backbone",
        "embedding": "_embed",
        "transformer": "_transformer",
        "optimal_transport": "_assignment",
        "predict": "_predict",
    }

    def __init__(self, net) -> None:
        self.total = dict.fromkeys(self.STEPS, 0.0)
        self._lock = threading.Lock()
        for stage, method in self.STEPS.items():
            setattr(net, method, self._timed(stage, getattr(net, method)))

    def _timed(self, stage: str, func):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                with self._lock:
                    self.total[stage] += time.perf_counter() - start

        return call

    def reset(self) -> None:
        self.total = dict.fromkeys(self.total, 0.0)

    @property
    def totals(self) -> dict[str, float]:
        """``forward``, ``backbone``, ``transformer`` (embeddings included),
        ``optimal_transport``: ``_predict`` holds the transformer, the transport, matching and
        LGR; the backbone and the embeddings run before it."""
        t = self.total
        return {
            "forward": t["predict"] + t["backbone"] + t["embedding"],
            "backbone": t["backbone"],
            "transformer": t["embedding"] + t["transformer"],
            "optimal_transport": t["optimal_transport"],
        }
