"""Build the labelled verdict set and fit the verdict model (:mod:`pcreg.registration.verdict`).

    python tools/verdict_set.py build OUT_DIR [--rooms 60 --objects 60 --streets 30 --workers 2]
    python tools/verdict_set.py fit OUT_DIR [--write]

``build`` runs the default pipeline (``auto``) on every case of :mod:`pcreg.bench.verdict_set`
with the search made exhaustive (every reading of the units, every step), labels each candidate
by the ground truth and appends one JSON line per case to ``OUT_DIR/cases.jsonl`` (resumable:
cases already there are skipped). ``fit`` fits the logistic model on the scenes of the ``fit``
split, chooses the rival margin, and per family the score threshold and the symmetry probe's
margin, on their out-of-fold scores by replaying the search as ``auto`` runs it (stopping at
the first registered verdict), reports
precision and recall of that final output per family and class on the held-out scenes, writes
the table ``OUT_DIR/verdict_set.csv.gz`` and, with ``--write``, ``pcreg/weights/verdict.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pcreg.bench.verdict_set import CONGRUENT, cases, label_candidates, split_of  # noqa: E402
from pcreg.registration.verdict import (  # noqa: E402
    FEATURES,
    MIN_CLUTTER_RATIO,
    MIN_CLUTTER_SHARE,
    MIN_CONTRAST,
    MIN_DETAIL,
    MIN_STREET_CONSTRAINT,
    SHIFT_MARGIN,
    Trees,
    VerdictModel,
    different,
    family,
)
from pcreg.registration.verify import MIN_INLIERS  # noqa: E402

KITTI = REPO.parent / "shared" / "train_data" / "kitti_seq00-07_semantickitti_mini"
log = logging.getLogger("verdict_set")

_PIPE = None


def _run(case) -> dict:
    """One case through the exhaustive search; its candidates with features and labels."""
    global _PIPE
    from pcreg.api import pipeline
    from pcreg.errors import InputError

    if _PIPE is None:
        _PIPE = pipeline(None, method="auto")
        _PIPE.exhaustive = True
    head = {"family": case.family, "cls": case.cls, "scene": case.scene, "name": case.name,
            "has_gt": case.gt is not None, "street": case.street,
            "congruence": case.congruence, "symmetric": case.symmetric}  # fmt: skip
    t0 = time.perf_counter()
    try:
        result = _PIPE(case.src, case.ref)
    except InputError as err:
        return {**head, "refused": str(err), "candidates": []}
    except Exception as err:
        return {**head, "error": f"{type(err).__name__}: {err}", "candidates": []}
    verdict = result.verdict
    cands = verdict.candidates
    labels = label_candidates(case, [c.transform for c in cands])
    centre, diagonal = verdict.centre, verdict.diagonal  # as the search compared poses
    rows = []
    for i, (c, lab) in enumerate(zip(cands, labels, strict=True)):
        rows.append({
            "step": c.step, "path": c.path, "units": c.result.units, "scale": c.result.scale,
            "transform": np.asarray(c.transform).round(6).tolist(),
            "features": c.features, **lab,
            # which earlier candidates are at a different pose (for the ambiguity rule)
            "differs": [j for j in range(i)
                        if different(cands[j].transform, c.transform, centre, diagonal)],
        })  # fmt: skip
    return {**head, "time_s": time.perf_counter() - t0, "candidates": rows}


def build(args) -> None:
    from multiprocessing import get_context

    from tqdm import tqdm

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "cases.jsonl"
    done = set()
    if path.is_file():
        done = {json.loads(line)["name"] for line in path.read_text().splitlines() if line}
    todo = (c for c in cases(args.rooms, args.objects, args.streets,
                             KITTI if args.kitti else None, args.pairs_per_scene, args.seed,
                             args.kitti_limit) if c.name not in done)  # fmt: skip
    os.environ.setdefault("PCREG_THREADS", "1")
    with open(path, "a") as fh, get_context("spawn").Pool(args.workers, _init) as pool:
        for rec in tqdm(pool.imap_unordered(_run, todo, chunksize=1), desc="cases"):
            fh.write(json.dumps(rec, default=float) + "\n")
            fh.flush()


def _init() -> None:
    import torch

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.WARNING)


# -- fitting ------------------------------------------------------------------------------


def load(out: Path) -> list[dict]:
    """The cases of ``out/cases.jsonl`` (a line cut short by an interrupted build is left
    out, and counted)."""
    recs, bad = [], 0
    for line in (out / "cases.jsonl").read_text().splitlines():
        try:
            recs.append(json.loads(line))
        except json.JSONDecodeError:
            bad += 1
    if bad:
        print(f"{bad} unreadable lines left out")
    return recs


USED = FEATURES  # set by --drop


def _matrix(recs: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, y, group = [], [], []
    for r in recs:
        for c in r["candidates"]:
            x.append([float(c["features"].get(f, 0.0)) for f in USED])
            y.append(bool(c["right"]))
            group.append(r["scene"])
    return np.nan_to_num(np.array(x)), np.array(y), np.array(group)


KIND = "gbm"  # set by --model


def _fit_lr(x: np.ndarray, y: np.ndarray, kind: str | None = None):
    """A fitted model as ``(mean, scale, weights, bias, trees)`` (:class:`VerdictModel`'s
    parts): logistic regression, or gradient-boosted trees (``kind`` "gbm"; default:
    ``--model``)."""
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression

    if (kind or KIND) == "lr":
        mean, scale = x.mean(0), x.std(0) + 1e-9
        lr = LogisticRegression(C=1.0, max_iter=5000)
        lr.fit((x - mean) / scale, y)
        return mean, scale, lr.coef_[0], float(lr.intercept_[0]), None
    gbm = GradientBoostingClassifier(n_estimators=150, max_depth=3, learning_rate=0.1,
                                     subsample=0.8, random_state=0).fit(x, y)  # fmt: skip
    nodes = []
    for est in gbm.estimators_[:, 0]:
        t = est.tree_
        nodes.append({"feature": np.maximum(t.feature, 0).astype(np.int64),
                      "threshold": t.threshold.astype(np.float64),
                      "left": t.children_left.astype(np.int64),
                      "right": t.children_right.astype(np.int64),
                      "value": t.value[:, 0, 0].astype(np.float64)})  # fmt: skip
    trees = Trees(float(gbm.learning_rate), tuple(nodes))
    sums = np.array([trees.raw(row) for row in x[:50]])
    bias = float(np.mean(gbm.decision_function(x[:50]) - sums))
    check = np.array([trees.raw(row) for row in x[:200]]) + bias
    assert np.allclose(check, gbm.decision_function(x[:200]), atol=1e-6), "tree export differs"
    n = x.shape[1]
    return np.zeros(n), np.ones(n), np.zeros(n), bias, trees


def _scores(x, mean, scale, w, b, trees=None) -> np.ndarray:
    logit = ((x - mean) / scale) @ w + b
    if trees is not None:
        logit = logit + np.array([trees.raw(row) for row in x])
    return 1.0 / (1.0 + np.exp(-logit))


def replay(
    rec: dict,
    scores: list[float],
    threshold: float | dict[str, float],
    rival: float,
    floor: float,
    probe: float | dict[str, float] = float("inf"),
):
    """``auto``'s final output on one case from its candidates' scores: (registered, right,
    any candidate right). Judged after each step, stopping at the first registered verdict,
    as :func:`pcreg.registration.auto.register_auto` does. ``threshold`` and ``probe``: one
    value, or one per family (:func:`~pcreg.registration.verdict.family` of the best
    candidate; a family missing from ``probe`` gets its largest value, as
    :meth:`~pcreg.registration.verdict.VerdictModel.probe_for` falls back to it)."""
    cands = rec["candidates"]
    any_right = any(c["right"] for c in cands)
    if not cands:
        return False, False, any_right
    steps = sorted({c["step"] for c in cands})

    def differ(i: int, j: int) -> bool:
        hi, lo = max(i, j), min(i, j)
        return lo in cands[hi]["differs"]

    for k, step in enumerate(steps):
        seen = [i for i, c in enumerate(cands) if c["step"] <= step]
        # FPFH + RANSAC alone, in a room, only where a network estimate reached its pose
        # (pcreg.registration.verdict.unconfirmed)
        network = [i for i in seen if cands[i]["features"].get("fpfh_alone", 0.0) < 0.5]
        eligible = [i for i in seen if not (
            network and cands[i]["features"].get("fpfh_alone", 0.0) >= 0.5
            and family(cands[i]["features"]) == "rooms"
            and all(differ(i, j) for j in network))]  # fmt: skip
        best = max(eligible, key=lambda i: scores[i])  # never empty: the network's stay
        inliers = cands[best]["features"].get("log_inliers", 0.0)
        t = threshold[family(cands[best]["features"])] if isinstance(threshold, dict) else threshold
        contrast = cands[best]["features"].get("contrast", 0.0)
        ok = scores[best] >= t and inliers >= np.log10(1 + MIN_INLIERS)
        ok = ok and contrast >= MIN_CONTRAST
        fam = family(cands[best]["features"])
        # a family without its own margin gets the largest (VerdictModel.probe_for's fallback)
        limit = (probe.get(fam, max(probe.values(), default=float("inf")))
                 if isinstance(probe, dict) else probe)  # fmt: skip
        ok = ok and cands[best]["features"].get("probe_margin", 0.0) < limit
        # another place that fits as well (a table built before the shift probe has none)
        ok = ok and cands[best]["features"].get("shift_margin", 0.0) < SHIFT_MARGIN
        # a room's fit on a floor and walls only (a table built before the measurement has
        # none)
        ok = ok and (fam != "rooms" or cands[best]["features"].get("detail", 1.0) >= MIN_DETAIL)
        # a fit that rests on a room's shell (not a street's; a table built before the
        # measurement has none)
        f = cands[best]["features"]
        ok = ok and (fam == "streets" or f.get("clutter_share", 0.0) < MIN_CLUTTER_SHARE
                     or f.get("clutter_ratio", 1.0) >= MIN_CLUTTER_RATIO)  # fmt: skip
        # a street's fit that leaves a direction free (a road alone)
        ok = ok and (fam != "streets" or cands[best]["features"].get("constraint", 1.0)
                     >= MIN_STREET_CONSTRAINT)  # fmt: skip
        if ok:
            need = max(scores[best] - rival, t * floor)
            for i in seen:
                if i == best or scores[i] < need:
                    continue
                pair = (i, best) if i > best else (best, i)
                if pair[1] in cands[pair[0]]["differs"]:
                    ok = False
                    break
        if ok or k == len(steps) - 1:
            return ok, bool(ok and cands[best]["right"]), any_right
    return False, False, any_right


def evaluate(recs, scores_of, threshold, rival, floor, probe=float("inf")):
    """Per (family, cls): accepted, accepted wrong, solvable (any candidate right), accepted
    right."""
    table: dict[tuple[str, str], list[int]] = {}
    for r in recs:
        reg, right, solvable = replay(r, scores_of(r), threshold, rival, floor, probe)
        row = table.setdefault((r["family"], r["cls"]), [0, 0, 0, 0, 0])
        row[0] += 1
        row[1] += reg
        row[2] += reg and not right
        row[3] += solvable
        row[4] += right
    return table


def _summary(table, by=lambda k: k[0]):
    out: dict[str, list[int]] = {}
    for k, v in table.items():
        row = out.setdefault(by(k), [0] * 5)
        for i, n in enumerate(v):
            row[i] += n
    return out


#: the probe margins each family's rule is chosen from (inf: the probe never refuses)
PROBES = (0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.1, float("inf"))
#: families whose probe margin is not a rule (inf): a generated room's truth fits its turned
#: self 0.99-1.22x as well (boxes of boxes). On the completed set the rule chose 1.1 for rooms
#: (out of fold 6 fewer wrong of 225 registered, no right one lost), and that model refused the
#: demo's own room pair, registered within 0.01 deg, as ambiguous at 1.12
NO_PROBE = ("rooms",)


def _choose(rows: dict[float, list[int]], args) -> float:
    """A family's threshold from its replayed rows ``{threshold: [cases, registered, wrong,
    solvable, right]}``: the lowest reaching ``--precision`` (most recall); else, with
    ``--recall-floor``, the most precise keeping that recall; else the cost rule (right
    accepts - ``--cost`` (10) x wrong accepts: "one confident wrong answer costs more than
    ten honest refusals")."""
    reach = [t for t, r in rows.items() if r[1] and 1 - r[2] / r[1] >= args.precision]
    if args.cost is not None:  # the utility rule alone, for every family
        reach = []
    floor_ok = args.recall_floor is None or (
        reach and rows[min(reach)][4] >= args.recall_floor * max(rows[min(reach)][3], 1)
    )
    if reach and floor_ok:
        return min(reach)
    if args.recall_floor is not None:
        keep = [t for t, r in rows.items() if r[4] >= args.recall_floor * max(r[3], 1)]
        return max(keep) if keep else min(rows)
    cost = 10.0 if args.cost is None else args.cost
    return max(rows, key=lambda t: (rows[t][4] - cost * rows[t][2], t))


def fit(args) -> None:
    from sklearn.model_selection import GroupKFold

    out = Path(args.out)
    every = load(out)
    congruent = [r for r in every if (r.get("congruence") or 0.0) >= CONGRUENT]
    recs = [r for r in every if r["candidates"] and r not in congruent]
    print(f"{len(congruent)} mirror cases left out: the mirrored source fits itself under a "
          f"rigid motion (congruence >= {CONGRUENT})")  # fmt: skip
    for r in recs:
        if r["cls"] == "symmetric" or r.get("symmetric"):  # a box or a cylinder, any class:
            # a right pose is luck; must refuse
            for c in r["candidates"]:
                c["right"] = False
    # cross-family cases pair clouds of two scenes: held out whole (never fitted on)
    fit_recs = [r for r in recs if split_of(r["scene"]) == "fit" and r["cls"] != "cross"]
    test_recs = [r for r in recs if split_of(r["scene"]) == "test" or r["cls"] == "cross"]
    x, y, groups = _matrix(fit_recs)
    print(f"{len(recs)} cases, {sum(len(r['candidates']) for r in recs)} candidates "
          f"({len(fit_recs)} / {len(test_recs)} cases fit / held out)")  # fmt: skip
    # out-of-fold scores for choosing the threshold and the margin
    oof = np.zeros(len(y))
    for tr, te in GroupKFold(5).split(x, y, groups):
        oof[te] = _scores(x[te], *_fit_lr(x[tr], y[tr]))
    offsets, k = {}, 0
    for r in fit_recs:
        offsets[id(r)] = k
        k += len(r["candidates"])

    def oof_of(r):
        return list(oof[offsets[id(r)] : offsets[id(r)] + len(r["candidates"])])

    # the margin rule is shared; each family gets its own probe margin and the lowest
    # threshold at which its replayed final output reaches the precision target (out of fold)
    families = ("rooms", "objects", "streets")
    grid = [float(t) for t in np.arange(0.30, 0.995, 0.01)] + [0.995, 0.998, 0.999]
    by_family = {fam: [r for r in fit_recs if r["family"] == fam] for fam in families}
    best = None
    for rival in (0.05, 0.1, 0.2, 0.3):
        thresholds, probes = {}, {}
        for fam in families:
            pick = None
            for probe in (float("inf"),) if fam in NO_PROBE else PROBES:
                rows = {t: _summary(evaluate(by_family[fam], oof_of, t, rival, 0.5, probe)).get(fam)
                        for t in grid}  # fmt: skip
                rows = {t: r for t, r in rows.items() if r is not None}
                if not rows:
                    continue
                t = _choose(rows, args)
                r = rows[t]
                prec, rec = 1 - r[2] / max(r[1], 1), r[4] / max(r[3], 1)
                # the probe margin by the same rule as the threshold: both targets met, the
                # most recall; else, keeping --recall-floor, the most precise; else the most
                # recall
                floor_ok = args.recall_floor is None or rec >= args.recall_floor
                if prec >= args.precision and floor_ok:
                    key = (2, rec, prec)
                elif floor_ok:
                    key = (1, prec, rec)
                else:
                    key = (0, rec, prec)
                if pick is None or key > pick[0]:
                    pick = (key, t, probe)
            if pick is not None:
                thresholds[fam], probes[fam] = pick[1], pick[2]
        table = _summary(evaluate(fit_recs, oof_of, thresholds, rival, 0.5, probes))
        worst_prec = min(1 - v[2] / max(v[1], 1) for v in table.values())
        worst_rec = min(v[4] / max(v[3], 1) for v in table.values())
        key = (worst_prec >= args.precision, worst_rec, worst_prec)
        if best is None or key > best[0]:
            best = (key, dict(thresholds), rival, dict(probes))
    (ok, rec_, prec), thresholds, rival, probes = best
    floor = 0.5
    threshold = max(thresholds.values())
    probe = max(probes.values())
    print(
        f"chosen (out-of-fold, fit scenes): thresholds {thresholds}, rival {rival}, probes "
        f"{probes}: worst family precision {prec:.4f}, recall {rec_:.4f}"
        + ("" if ok else f" (the target {args.precision} is not reached)")
    )
    mean, scale, w, b, trees = _fit_lr(x, y)
    version = (
        f"verdict-set {len(recs)} cases / {len(y)} fit candidates, {time.strftime('%Y-%m-%d')}"
    )
    model = VerdictModel(USED, mean, scale, w, b, float(threshold), rival, floor, version,
                         trees=trees, probe=probe, thresholds=thresholds,
                         probes=probes)  # fmt: skip
    if trees is None:
        for f, wi in zip(USED, w, strict=True):
            print(f"  {f:16s} {wi:+.3f}")

    def test_scores(r):
        return [model.score(c["features"]) for c in r["candidates"]]

    table = evaluate(test_recs, test_scores, thresholds, rival, floor, probes)
    report = _report(table, len(test_recs))
    print(report)
    (out / "report.md").write_text(report)
    _write_table(out, recs)
    if args.write:
        classical = _fit_classical(fit_recs, args.precision, args.recall_floor)
        path = REPO / "pcreg" / "weights" / "verdict.json"
        path.write_text(json.dumps({"auto": model.to_dict(), "classical": classical.to_dict()},
                                   indent=1) + "\n")  # fmt: skip
        print(f"wrote {path}")


#: the classical model is logistic whatever ``--model`` says: it is fitted on FPFH + RANSAC's
#: candidates alone (about 500), too few for 150 trees (fitted as trees on the 2026-11-27
#: set, it scored a right generated room pair 0.05)
CLASSICAL_KIND = "lr"
#: what the classical model does not see: the network's measurements, and the symmetry
#: probe's margin (with its face turns a generated room's truth fits its turned self 1.0-1.2x
#: as well, objects' symmetric poses 0.6-1.0x: one linear weight cannot serve both, and the
#: auto model's trees and per-family probe rule do this work there)
CLASSICAL_LEFT_OUT = ("agreement", "hyp_margin", "from_fpfh", "fpfh_alone", "reading_rank",
                      "probe_margin")  # fmt: skip


def _fit_classical(fit_recs, precision, recall_floor=None) -> VerdictModel:
    """The model for ``method="fpfh-ransac"`` alone: FPFH + RANSAC's candidates, scored
    without the network (no agreement, no hypothesis margin), threshold at the precision
    target on out-of-fold scores."""
    from sklearn.model_selection import GroupKFold

    names = tuple(f for f in USED if f not in CLASSICAL_LEFT_OUT)
    x, y, g = [], [], []
    for r in fit_recs:
        for c in r["candidates"]:
            # what --method fpfh-ransac sees: FPFH + RANSAC alone on the user's metres
            if (c["path"] == "fpfh-ransac" and c["units"] == "metres"
                    and not c["features"].get("object_reading", 0)
                    and c["features"].get("reading_rank", 0) == 0):  # fmt: skip
                x.append([float(c["features"].get(f, 0.0)) for f in names])
                y.append(bool(c["right"]))
                g.append(r["scene"])
    x, y, g = np.nan_to_num(np.array(x)), np.array(y), np.array(g)
    oof = np.zeros(len(y))
    for tr, te in GroupKFold(5).split(x, y, g):
        oof[te] = _scores(x[te], *_fit_lr(x[tr], y[tr], CLASSICAL_KIND))
    grid = np.arange(0.3, 0.995, 0.01)
    reach = [t for t in grid if (oof >= t).sum() and y[oof >= t].mean() >= precision]

    def recall(t):
        return ((oof >= t) & y).sum() / max(y.sum(), 1)

    if reach and (recall_floor is None or recall(min(reach)) >= recall_floor):
        threshold = float(min(reach))  # the lowest threshold reaching the target
    elif recall_floor is not None:  # the most precise keeping that recall
        threshold = float(max([t for t in grid if recall(t) >= recall_floor], default=grid[0]))
    else:  # right accepts - 10 x wrong accepts
        threshold = float(
            max(grid, key=lambda t: ((oof >= t) & y).sum() - 10 * ((oof >= t) & ~y).sum())
        )
    mean, scale, w, b, trees = _fit_lr(x, y, CLASSICAL_KIND)
    acc = oof >= threshold
    precision_oof = y[acc].mean() if acc.sum() else float("nan")
    recall_oof = (acc & y).sum() / max(y.sum(), 1)
    print(f"classical: {len(y)} candidates, threshold {threshold:.2f}, out-of-fold precision "
          f"{precision_oof:.4f}, recall {recall_oof:.4f}")  # fmt: skip
    return VerdictModel(names, mean, scale, w, b, threshold, 0.0, 1.0,
                        f"classical, {len(y)} candidates", kind="classical",
                        trees=trees)  # fmt: skip


def _report(table, n) -> str:
    lines = [f"Held-out scenes ({n} cases): auto's final output, as replayed from the exhaustive "
             "search.", "",
             "| family | class | cases | registered | wrong but registered | solvable "
             "| right and registered | recall |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for (fam, cls), v in sorted(table.items()):
        recall = f"{v[4] / v[3]:.3f}" if v[3] else "-"
        lines.append(f"| {fam} | {cls} | {v[0]} | {v[1]} | {v[2]} | {v[3]} | {v[4]} | {recall} |")
    lines += ["", "| family | registered | wrong but registered | precision | recall |",
              "|---|---:|---:|---:|---:|"]  # fmt: skip
    for fam, v in sorted(_summary(table).items()):
        prec = 1 - v[2] / v[1] if v[1] else float("nan")
        lines.append(f"| {fam} | {v[1]} | {v[2]} | {prec:.4f} | {v[4] / max(v[3], 1):.4f} |")
    return "\n".join(lines) + "\n"


def _write_table(out: Path, recs: list[dict]) -> None:
    cols = ["family", "cls", "scene", "split", "name", "step", "path", "units", "scale",
            *FEATURES, "shift_margin", "detail", "clutter_share", "clutter_ratio", "right",
            "rre_deg", "rte", "rmse"]  # fmt: skip
    tmp = out / "verdict_set.csv.gz.tmp"
    with gzip.open(tmp, "wt") as fh:
        fh.write(",".join(cols) + "\n")
        for r in recs:
            for c in r["candidates"]:
                row = {**r, **c, **c["features"], "split": split_of(r["scene"])}
                fh.write(",".join(_cell(row.get(k, "")) for k in cols) + "\n")
    tmp.replace(out / "verdict_set.csv.gz")


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.5g}"
    return str(v).replace(",", ";")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("--rooms", type=int, default=60)
    b.add_argument("--objects", type=int, default=60)
    b.add_argument("--streets", type=int, default=30)
    b.add_argument("--kitti", action=argparse.BooleanOptionalAction, default=True)
    b.add_argument("--kitti-limit", type=int, default=None)
    b.add_argument("--pairs-per-scene", type=int, default=3)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--workers", type=int, default=2)
    f = sub.add_parser("fit")
    f.add_argument("out")
    f.add_argument("--precision", type=float, default=0.997)
    f.add_argument("--write", action="store_true")
    f.add_argument("--model", choices=("lr", "gbm"), default="gbm")
    f.add_argument("--drop", default="", help="comma-separated measurements left out")
    f.add_argument("--recall-floor", type=float, default=None,
                   help="where a family cannot reach --precision: its most precise threshold "
                   "that keeps this share of the solvable cases registered (default: the cost "
                   "rule)")  # fmt: skip
    f.add_argument("--cost", type=float, default=None,
                   help="choose every family's threshold by right accepts - COST x wrong "
                   "accepts (default: the lowest reaching --precision, that rule with cost 10 "
                   "where none does)")  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.cmd == "fit":
        global KIND, USED
        KIND = args.model
        USED = tuple(f for f in FEATURES if f not in args.drop.split(","))
    build(args) if args.cmd == "build" else fit(args)


if __name__ == "__main__":
    main()
