"""Shadow comparison: the same questions on a staged generation and on the serving one.

An operator reads recall (where gold ids exist), how much the top-k lists overlap, and latency
on both sides before deciding to promote.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

from schemas.release import ShadowByType, ShadowQuestion, ShadowReport, ShadowRow  # noqa: F401 (re-exported)
from schemas.retrieval import Principal
from schemas.settings import MabillonSettings
from tasks.eval.metrics import rank_of, recall_at_k
from tasks.eval.questions import load_questions
from tasks.eval.systems import Baseline
from tasks.query.retriever import Retriever
from tasks.store.layout import StoreLayout
from tasks.store.routing import read_routing


def load_shadow_questions(path: Path) -> list[ShadowQuestion]:
    """The shadow set; a line without an id is named `q<line number>`."""
    return load_questions(path, model=ShadowQuestion, default_id=lambda n: f"q{n}", unique_ids=False)


def _recall(ranked: list[str], gold: list[str], k: int) -> float | None:
    """tasks/eval's recall@k of a (deduplicated) top-k list; None without gold ids."""
    return recall_at_k(rank_of(ranked), gold, k) if gold else None


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def shadow_compare(settings: MabillonSettings, principal: Principal, staged: str,
                   questions: list[ShadowQuestion], system: str = "hybrid", k: int = 10) -> ShadowReport:
    serving = read_routing(StoreLayout.from_settings(settings)).serving
    if serving is None:
        raise RuntimeError("nothing is serving; promote a generation before shadowing another")
    sides = {"staged": Retriever.open(settings, principal, staged),
             "serving": Retriever.open(settings, principal, serving)}
    runner = Baseline(name=system, depth=max(k, 50))
    # Latency compares steady state: each side loads its index on an untimed first question,
    # and query vectors (shared by sides of one embedding space) are embedded before timing.
    for retriever in sides.values():
        retriever.prime([q.question for q in questions])
        if questions:
            runner.answer(retriever, questions[0].question)
    rows = []
    for n, q in enumerate(questions):
        ranked, latency = {}, {}
        order = list(sides.items()) if n % 2 == 0 else list(reversed(sides.items()))
        for side, retriever in order:
            t0 = time.perf_counter()
            ranked[side] = runner.answer(retriever, q.question).ranked[:k]
            latency[side] = time.perf_counter() - t0
        rows.append(ShadowRow(
            question_id=q.question_id or "", question_type=q.question_type,
            staged=ranked["staged"], serving=ranked["serving"],
            overlap=len(set(ranked["staged"]) & set(ranked["serving"])) / k,
            recall_staged=_recall(ranked["staged"], q.gold_ids, k),
            recall_serving=_recall(ranked["serving"], q.gold_ids, k),
            latency_staged_s=latency["staged"], latency_serving_s=latency["serving"]))

    return ShadowReport(
        staged=staged, serving=serving, system=system, k=k, n=len(rows),
        recall_staged=_mean(r.recall_staged for r in rows),
        recall_serving=_mean(r.recall_serving for r in rows),
        mean_overlap=_mean(r.overlap for r in rows) or 0.0,
        latency_staged_median_s=statistics.median(r.latency_staged_s for r in rows) if rows else 0.0,
        latency_serving_median_s=statistics.median(r.latency_serving_s for r in rows) if rows else 0.0,
        latency_staged_p95_s=_p95([r.latency_staged_s for r in rows]) if rows else 0.0,
        latency_serving_p95_s=_p95([r.latency_serving_s for r in rows]) if rows else 0.0,
        rows=rows, by_type=by_type(rows))


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def by_type(rows: list[ShadowRow]) -> list[ShadowByType]:
    """Recall and overlap per question type (questions without one count as "untyped")."""
    groups: dict[str, list[ShadowRow]] = {}
    for r in rows:
        groups.setdefault(r.question_type or "untyped", []).append(r)
    return [ShadowByType(question_type=t, n=len(rs), recall_staged=_mean(r.recall_staged for r in rs),
                         recall_serving=_mean(r.recall_serving for r in rs),
                         mean_overlap=_mean(r.overlap for r in rs) or 0.0)
            for t, rs in sorted(groups.items())]
