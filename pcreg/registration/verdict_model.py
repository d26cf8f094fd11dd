"""The verdict's scoring model: the probability that a candidate is right, from its
measurements (:data:`~pcreg.registration.verdict.FEATURES`), fitted by
``python tools/verdict_set.py`` and shipped as ``pcreg/weights/verdict.json``; each family of
candidates (:func:`family`) has its own threshold and symmetry-probe margin. The decision over
a search's candidates that uses it: :mod:`pcreg.registration.verdict`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = [
    "CLEAR_PROBE",
    "FIT_CAP",
    "MODEL_PATH",
    "Trees",
    "VerdictModel",
    "family",
    "load_verdict_model",
]

MODEL_PATH = Path(__file__).resolve().parents[1] / "weights" / "verdict.json"


def family(features: dict[str, float]) -> str:
    """``"objects"`` (an object reading of the units), ``"streets"`` (the outdoor network) or
    ``"rooms"``: the family a candidate's threshold is chosen for."""
    if features.get("object_reading", 0.0) > 0.5:
        return "objects"
    return "streets" if features.get("outdoor", 0.0) > 0.5 else "rooms"


#: a perfect fit: the shipped trees score candidates that fit over 0.95 of both clouds lower
#: than ones that fit 0.9, because every such candidate of the labelled set was a symmetric
#: object (a box's view onto another, labelled wrong: a right pose there is luck). A real scan
#: registered onto a moved copy of itself (the Stanford bunny mesh; a bunny range view:
#: fitness 1.0 both ways, the probe's margin 0.40) scored 0.24-0.47 against the objects'
#: threshold 0.61 and was refused, right within 0.02 deg. Where the symmetry probe finds no
#: turned pose fitting :data:`CLEAR_PROBE` as well, the score is at least the model's at the
#: fit lowered to :data:`FIT_CAP` (the 95th percentile of the right room candidates' fitness,
#: 0.966; objects 0.983): a better fit never scores lower. On the labelled set's 5,563
#: candidates this changes no replayed outcome, fit or held out (with 0.8 for the probe two
#: wrong objects of the fit scenes would register)
FIT_CAP = 0.95
CLEAR_PROBE = 0.7


@dataclass(frozen=True)
class VerdictModel:
    """A logistic model over :data:`~pcreg.registration.verdict.FEATURES` (standardised by
    ``mean`` / ``scale``): ``score = 1 / (1 + exp(-(w . z + bias + trees(x))))``, where
    ``trees`` (optional) are gradient-boosted regression trees on the raw measurements
    (:class:`Trees`);
    ``threshold``: the score from which the best candidate registers; ``rival``: a candidate
    at a different pose scoring at least ``best - rival`` and at least ``threshold *
    rival_floor`` makes the pair ambiguous. ``version``: names the labelled set and fit it
    came from."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    threshold: float
    rival: float
    rival_floor: float
    version: str
    kind: str = "auto"
    trees: Trees | None = None
    #: the best candidate is ambiguous when the probe's different pose fits at least this
    #: share as well as it (:func:`~pcreg.registration.symmetry.symmetry_probe`; inf: never)
    probe: float = float("inf")
    #: per family (:func:`family`), the threshold that replaces ``threshold``
    thresholds: dict[str, float] = field(default_factory=dict)
    #: per family, the probe margin that replaces ``probe`` (a room built of boxes fits its
    #: turned self nearly as well at the truth; an object does not)
    probes: dict[str, float] = field(default_factory=dict)

    def threshold_for(self, features: dict[str, float]) -> float:
        """The score from which a candidate with these measurements registers."""
        return self.thresholds.get(family(features), self.threshold)

    def probe_for(self, features: dict[str, float]) -> float:
        """The probe margin from which a candidate with these measurements is ambiguous."""
        return self.probes.get(family(features), self.probe)

    def score(self, features: dict[str, float]) -> float:
        """The probability that a candidate with these measurements is right; where the
        symmetry probe clears it (margin under :data:`CLEAR_PROBE`), no less than it would be
        with its fit both ways lowered to :data:`FIT_CAP` (its note: "a perfect fit")."""
        raw = self._score(features)
        fit = (float(features.get("fitness", 0.0)), float(features.get("reverse_fitness", 0.0)))
        clear = float(features.get("probe_margin", 0.0)) < CLEAR_PROBE
        if clear and max(fit) > FIT_CAP:
            capped = {**features, "fitness": min(fit[0], FIT_CAP),
                      "reverse_fitness": min(fit[1], FIT_CAP)}  # fmt: skip
            raw = max(raw, self._score(capped))
        return raw

    def _score(self, features: dict[str, float]) -> float:
        x = np.array([float(features.get(name, 0.0)) for name in self.features])
        x = np.clip(np.nan_to_num(x, nan=0.0), -1e6, 1e6)
        logit = ((x - self.mean) / self.scale) @ self.weights + self.bias
        if self.trees is not None:
            logit += self.trees.raw(x)
        return float(1.0 / (1.0 + np.exp(-logit)))

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "version": self.version,
            "features": list(self.features),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "weights": self.weights.tolist(),
            "bias": self.bias,
            "threshold": self.threshold,
            "rival": self.rival,
            "rival_floor": self.rival_floor,
            "trees": None if self.trees is None else self.trees.to_dict(),
            "probe": None if not np.isfinite(self.probe) else self.probe,
            "thresholds": dict(self.thresholds),
            "probes": {k: (None if not np.isfinite(v) else v) for k, v in self.probes.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> VerdictModel:
        return cls(
            tuple(data["features"]),
            np.asarray(data["mean"], np.float64),
            np.asarray(data["scale"], np.float64),
            np.asarray(data["weights"], np.float64),
            float(data["bias"]),
            float(data["threshold"]),
            float(data["rival"]),
            float(data["rival_floor"]),
            str(data["version"]),
            str(data.get("kind", "auto")),
            Trees.from_dict(data["trees"]) if data.get("trees") else None,
            float("inf") if data.get("probe") is None else float(data["probe"]),
            {k: float(v) for k, v in (data.get("thresholds") or {}).items()},
            {k: float("inf") if v is None else float(v)
             for k, v in (data.get("probes") or {}).items()},
        )  # fmt: skip


@dataclass(frozen=True)
class Trees:
    """Regression trees whose summed leaf values (times ``rate``) add to the logit: node ``i``
    of a tree splits on ``feature[i]`` at ``threshold[i]`` (``x <= threshold``: ``left[i]``,
    else ``right[i]``; a leaf has ``left[i] == -1`` and holds ``value[i]``). The layout of
    scikit-learn's fitted trees, stored as plain lists (no pickle)."""

    rate: float
    nodes: tuple[dict[str, np.ndarray], ...]

    def raw(self, x: np.ndarray) -> float:
        x = np.asarray(x, np.float32)  # scikit-learn's trees compare float32 values
        total = 0.0
        for t in self.nodes:
            i = 0
            while t["left"][i] != -1:
                i = t["left"][i] if x[t["feature"][i]] <= t["threshold"][i] else t["right"][i]
            total += float(t["value"][i])
        return self.rate * total

    def to_dict(self) -> dict[str, object]:
        return {"rate": self.rate, "nodes": [{k: v.tolist() for k, v in t.items()}
                                             for t in self.nodes]}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict) -> Trees:
        return cls(float(data["rate"]), tuple(
            {k: np.asarray(v, np.float64 if k in ("threshold", "value") else np.int64)
             for k, v in t.items()} for t in data["nodes"]
        ))  # fmt: skip


@lru_cache(maxsize=4)
def load_verdict_model(kind: str = "auto", path: str | None = None) -> VerdictModel:
    """The shipped verdict model of ``kind`` (``"auto"``: any candidate of the search, the
    network's agreement included; ``"classical"``: FPFH + RANSAC alone, no network)."""
    data = json.loads(Path(path or MODEL_PATH).read_text())
    return VerdictModel.from_dict(data[kind])
