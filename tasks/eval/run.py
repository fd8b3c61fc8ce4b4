"""Run one system over a question set: per-question rows (Arrow) and the summary document."""
from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import pyarrow as pa

from schemas.retrieval import EvalQuestion
from tasks.eval.metrics import (MISS_KINDS, accepted_pr, attribute_miss, mean,
                                question_metrics, rank_of)
from tasks.eval.systems import System, SystemAnswer
from tasks.query.retriever import Retriever

log = logging.getLogger(__name__)

COST_KEYS = ("llm_calls", "tokens_in", "tokens_out", "model_s", "framework_s")
TOP_KEPT = 20  # ranked documents kept per question in the rows

T = TypeVar("T")
R = TypeVar("R")


def bounded_map(fn: Callable[[T], R], items: Iterable[T], concurrency: int) -> Iterator[R]:
    """`fn` over `items` in order with at most `concurrency` calls in flight (and no more
    results waiting than that), so memory stays flat however long the question set."""
    if concurrency <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        window: list[Future] = []
        for item in items:
            window.append(pool.submit(fn, item))
            if len(window) >= concurrency:
                yield window.pop(0).result()
        for fut in window:
            yield fut.result()


def score_answer(q: EvalQuestion, ans: SystemAnswer, ks: Sequence[int]) -> dict[str, Any]:
    """One Parquet row: the metrics of one answer and, for the loop, where each miss went."""
    row: dict[str, Any] = {"question_id": q.question_id, "question_type": q.question_type,
                           "gold_ids": list(q.gold_ids), "ranked": ans.ranked[:TOP_KEPT],
                           "error": ans.error, "flags": list(ans.flags)}
    row.update(question_metrics(ans.ranked, q.gold_ids, ks, ans.scores))
    if ans.accepted is not None:
        p, r = accepted_pr(ans.accepted, q.gold_ids)
        row.update({"p_acc": p, "r_acc": r, "n_accepted": len(set(ans.accepted))})
        ranks = rank_of(ans.ranked)
        sets = dict(accepted=set(ans.accepted), held=set(ans.held),
                    rejected=set(ans.rejected), retrieved=set(ans.retrieved))
        row["misses"] = [f"{d}:{attribute_miss(d, **sets)}" for d in q.gold_ids
                         if ranks.get(d, 10**9) > max(ks)]
    else:
        row.update({"p_acc": None, "r_acc": None, "n_accepted": None, "misses": None})
    for key in COST_KEYS:
        row[key] = float(ans.cost.get(key, 0.0))
    return row


def aggregate(rows: list[dict[str, Any]], ks: Sequence[int], with_loop: bool) -> dict[str, Any]:
    keys = [f"recall@{k}" for k in ks] + ["mrr_first", "mrr_multi"]
    out: dict[str, Any] = {k: mean([r[k] for r in rows]) for k in keys}
    if with_loop:
        out["p_acc"] = mean([r["p_acc"] for r in rows])
        out["r_acc"] = mean([r["r_acc"] for r in rows])
        out["accepted_mean"] = mean([r["n_accepted"] for r in rows])
    else:
        out.update({"p_acc": None, "r_acc": None, "accepted_mean": None})
    return out


def summarize(system: str, generation: str, rows: list[dict[str, Any]], ks: Sequence[int],
              wall_s: float) -> dict[str, Any]:
    """The `mabillon eval --json` document (issue 5)."""
    with_loop = any(r["n_accepted"] is not None for r in rows)
    by_type: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_type.setdefault(r["question_type"], []).append(r)
    misses = None
    if with_loop:
        counts = Counter(m.rsplit(":", 1)[1] for r in rows for m in (r["misses"] or []))
        misses = {kind: counts.get(kind, 0) for kind in MISS_KINDS}
    cost = {k: sum(r[k] for r in rows) for k in COST_KEYS}
    cost["llm_calls"] = int(cost["llm_calls"])
    cost["tokens_in"], cost["tokens_out"] = int(cost["tokens_in"]), int(cost["tokens_out"])
    cost["wall_s"] = wall_s
    cost["framework_s_per_question"] = cost["framework_s"] / len(rows) if rows else 0.0
    return {
        "system": system, "generation": generation, "n": len(rows), "ks": list(ks),
        "overall": aggregate(rows, ks, with_loop),
        "by_type": {t: {"n": len(rs), **aggregate(rs, ks, with_loop)}
                    for t, rs in sorted(by_type.items())},
        "misses": misses,
        "errors": sum(1 for r in rows if r["error"]),
        "cost": cost,
    }


def evaluate(retriever: Retriever, system: System, questions: Sequence[EvalQuestion],
             ks: Sequence[int] = (3, 5, 10), concurrency: int = 1) -> tuple[pa.Table, dict]:
    """Answer every question (bounded concurrency) and score it. A question whose system
    fails is recorded with its error and scores zero, and the run goes on."""
    ks = sorted(set(ks))

    def one(q: EvalQuestion) -> dict[str, Any]:
        try:
            ans = system.answer(retriever, q.question)
        except Exception as exc:  # recorded per question, never fatal for the run
            log.warning("%s failed on %s: %s", system.name, q.question_id, exc)
            ans = SystemAnswer(ranked=[], accepted=[] if system.accepts else None,
                               error=f"{type(exc).__name__}: {exc}")
        return score_answer(q, ans, ks)

    t0 = time.perf_counter()
    system.prepare(retriever, [q.question for q in questions])
    rows = []
    for n, row in enumerate(bounded_map(one, questions, concurrency), start=1):
        rows.append(row)
        if n % 100 == 0:
            log.info("%s: %d/%d questions", system.name, n, len(questions))
    summary = summarize(system.name, retriever.generation, rows, ks, time.perf_counter() - t0)
    table = pa.Table.from_pylist([{"system": system.name, "generation": retriever.generation,
                                   **r} for r in rows])
    return table, summary
