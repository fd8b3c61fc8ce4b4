"""Fitting the learned judge and validating it honestly.

`fit` trains gradient-boosted trees (scikit-learn's HistGradientBoostingClassifier) on the
judge's rows and calibrates their probabilities with isotonic regression on out-of-fold
predictions of the training rows themselves (inner folds split by gold set, like the outer
ones). `cross_validate` is the only source of the figures we report: one model per outer
fold, trained without the fold's questions, and the TRACE loop run with that fold model on
that fold's questions only; the model committed with the code (trained on every development
question) is never what is evaluated.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from schemas.query import LoopParams
from schemas.retrieval import EvalQuestion
from tasks.eval.judge_data import JudgeData, gold_folds, gold_groups
from tasks.llm.features import FEATURES
from tasks.llm.judge_model import JudgeModel, Thresholds

log = logging.getLogger(__name__)

SEED = 0
# Fixed in advance, not searched on the development questions: moderate trees, many
# samples per leaf (rows of one question are correlated), a gentle learning rate.
TREE_PARAMS = dict(max_iter=200, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=40,
                   l2_regularization=1.0)


def make_estimator(seed: int = SEED):
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(**TREE_PARAMS, random_state=seed,
                                          categorical_features=[FEATURES.index("tool")])


def _group_splits(groups: np.ndarray, k: int) -> list[np.ndarray]:
    """k masks over rows; whole groups per split, similar sizes, deterministic."""
    ids, counts = np.unique(groups, return_counts=True)
    sizes = [0] * k
    assign = {}
    for g, n in sorted(zip(ids.tolist(), counts.tolist()), key=lambda t: (-t[1], t[0])):
        f = min(range(k), key=lambda i: (sizes[i], i))
        sizes[f] += n
        assign[g] = f
    fold = np.array([assign[g] for g in groups.tolist()])
    return [fold == i for i in range(k)]


# The operating point, declared before any validation: for calibrated probabilities the
# threshold that maximises F1 is half the best F1 achievable (Lipton, Elkan & Naryanaswamy,
# "Thresholding classifiers to maximize F1", 2014); half of the best accepted-set F1 on the
# training rows' out-of-fold probabilities is steadier than the arg-max of a flat F1 curve.
HOLD_THRESHOLD = 0.1


def accepted_pr(p: np.ndarray, data: JudgeData, threshold: float,
                gold_per_question: int = 2) -> tuple[float, float]:
    """(precision, recall) of the accepted set, averaged over questions, if every document
    whose best passage has P ≥ threshold were accepted (recall over `gold_per_question`)."""
    best: dict[tuple[str, str], tuple[float, bool]] = {}
    for q, d, x, y in zip(data.question.tolist(), data.doc.tolist(), p.tolist(), data.y.tolist()):
        if (q, d) not in best or x > best[(q, d)][0]:
            best[(q, d)] = (x, bool(y))
    per_q: dict[str, list[bool]] = {}
    for (q, _), (x, y) in best.items():
        bucket = per_q.setdefault(q, [])
        if x >= threshold:
            bucket.append(y)
    precision = [sum(v) / len(v) for v in per_q.values() if v]
    recall = [sum(v) / gold_per_question for v in per_q.values()]
    return (float(np.mean(precision)) if precision else 0.0), float(np.mean(recall))


def choose_thresholds(p: np.ndarray, data: JudgeData) -> Thresholds:
    """Accept at half the best accepted-set F1 (out-of-fold probabilities of training rows)."""
    best_f1 = 0.0
    for t in np.arange(0.05, 0.96, 0.01):
        precision, recall = accepted_pr(p, data, float(t))
        if precision + recall:
            best_f1 = max(best_f1, 2 * precision * recall / (precision + recall))
    accept = float(round(max(best_f1 / 2, 0.05), 2))
    return Thresholds(accept=accept, hold=min(HOLD_THRESHOLD, accept))


def fit(data: JudgeData, groups: np.ndarray, *, calibrate: bool = True, inner_folds: int = 3,
        thresholds: Thresholds | None = None, seed: int = SEED) -> JudgeModel:
    """Trees on every row; isotonic calibration and the thresholds from inner out-of-fold
    probabilities (inner folds by gold set too)."""
    from sklearn.isotonic import IsotonicRegression

    oof = np.zeros(len(data.y))
    for test in _group_splits(groups, inner_folds):
        est = make_estimator(seed).fit(data.X[~test], data.y[~test])
        oof[test] = est.predict_proba(data.X[test])[:, 1]
    calibrator = None
    if calibrate:
        calibrator = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0)
        calibrator.fit(oof, data.y.astype(float))
        oof = calibrator.predict(oof)
    chosen = thresholds or choose_thresholds(oof, data)
    estimator = make_estimator(seed).fit(data.X, data.y)
    return JudgeModel(estimator=estimator, calibrator=calibrator, thresholds=chosen,
                      trained={"rows": int(len(data.y)), "positives": int(data.y.sum()),
                               "questions": int(len(set(data.question.tolist()))),
                               "tree_params": TREE_PARAMS, "calibrated": calibrate,
                               "thresholds": {"accept": chosen.accept, "hold": chosen.hold},
                               "threshold_rule": "accept at half the best out-of-fold F1"})


def row_groups(data: JudgeData, questions: Sequence[EvalQuestion]) -> np.ndarray:
    """Each row's gold group (questions sharing a gold document share a group)."""
    g = gold_groups(questions)
    return np.array([g[q] for q in data.question.tolist()])


def fold_models(data: JudgeData, questions: Sequence[EvalQuestion], k: int = 5,
                **fit_kw: Any) -> tuple[dict[str, int], list[JudgeModel]]:
    """(question → outer fold, one model per fold trained without that fold's questions)."""
    folds = gold_folds(questions, k)
    row_fold = np.array([folds[q] for q in data.question.tolist()])
    groups = row_groups(data, questions)
    models = []
    for f in range(k):
        train = row_fold != f
        models.append(fit(data.take(train), groups[train], **fit_kw))
    return folds, models


def cross_validate(retriever, questions: Sequence[EvalQuestion], data: JudgeData,
                   params: LoopParams, *, k: int = 5, ks: Sequence[int] = (3, 5, 10),
                   concurrency: int = 2, new_ledger: Callable | None = None,
                   **fit_kw: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Outer k-fold by gold set: each fold's questions answered by the loop with the model
    trained on the other folds. Returns (rows as an Arrow table, summary, extras), the
    summary in the `mabillon eval` shape with the system named `trace+learned`; extras hold the
    out-of-fold probabilities (for calibration) and the timing."""
    import pyarrow as pa

    from tasks.eval.run import evaluate, summarize
    from tasks.eval.systems import Trace
    from tasks.llm.base import Ledger
    from tasks.llm.learned import LearnedProvider

    t0 = time.perf_counter()
    folds, models = fold_models(data, questions, k, **fit_kw)
    train_s = time.perf_counter() - t0
    rows: list[dict] = []
    oof_p, oof_y = [], []
    for f, model in enumerate(models):
        held_out = [q for q in questions if folds[q.question_id] == f]
        system = Trace(provider=LearnedProvider(model), params=params,
                       new_ledger=new_ledger or Ledger, name="trace+learned")
        table, _ = evaluate(retriever, system, held_out, ks, concurrency)
        rows += table.to_pylist()
        mask = np.isin(data.question, [q.question_id for q in held_out])
        oof_p.append(model.probabilities(data.X[mask]))
        oof_y.append(data.y[mask])
        log.info("fold %d: %d questions", f, len(held_out))
    by_id = {q.question_id: i for i, q in enumerate(questions)}
    rows.sort(key=lambda r: by_id[r["question_id"]])
    summary = summarize("trace+learned", retriever.generation, rows, sorted(set(ks)),
                        time.perf_counter() - t0)
    summary["cross_validated"] = {"folds": k, "split": "gold set (connected components)"}
    extras = {"probabilities": np.concatenate(oof_p), "labels": np.concatenate(oof_y),
              "train_s": train_s}
    return pa.Table.from_pylist(rows), summary, extras


def reliability(p: np.ndarray, y: np.ndarray, bins: int = 10) -> list[dict[str, float]]:
    """Calibration by probability bin: how many rows, their mean P, the share that was gold."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(p, edges) - 1, 0, bins - 1)
    out = []
    for b in range(bins):
        m = which == b
        out.append({"bin": f"{edges[b]:.1f}–{edges[b + 1]:.1f}", "n": int(m.sum()),
                    "mean_p": float(p[m].mean()) if m.any() else None,
                    "gold_share": float(y[m].mean()) if m.any() else None})
    return out


def brier(p: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((p - y.astype(float)) ** 2)) if len(p) else float("nan")
