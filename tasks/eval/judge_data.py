"""Training data for the learned judge: every passage the loop put in front of its reviewer,
with the features the judge sees and whether its document is gold for the question.

The loop runs with a recording policy (the `rules` decisions, or a learned judge's), which
keeps the typed context of each review and held re-evaluation; rows are labelled afterwards
from the question's gold set. Folds are split by gold set: questions that share a gold
document are in one connected group and never on both sides of a split.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from schemas.query import HeldContext, LoopParams, ReviewContext
from schemas.retrieval import EvalQuestion
from tasks.eval.run import bounded_map
from tasks.llm.base import Completion, LlmRequest, Provider
from tasks.llm.features import FEATURES, features


@dataclass
class JudgeData:
    """Rows of FEATURES with their labels and the question each came from."""

    X: np.ndarray
    y: np.ndarray
    question: np.ndarray  # question_id per row
    doc: np.ndarray  # doc_id per row
    purpose: np.ndarray  # review | held_review

    def take(self, rows: np.ndarray) -> "JudgeData":
        return JudgeData(self.X[rows], self.y[rows], self.question[rows], self.doc[rows],
                         self.purpose[rows])


@dataclass
class RecordingProvider:
    """Decides like `inner` and keeps the features of every passage it was asked to judge."""

    inner: Provider
    rows: list[tuple[str, str, np.ndarray]] = field(default_factory=list)  # purpose, doc, x
    _local: threading.local = field(default_factory=threading.local, repr=False)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str | None:
        return self.inner.model

    def complete(self, request: LlmRequest) -> Completion:
        ctx = request.context
        if isinstance(ctx, ReviewContext) and ctx.hits:
            self._keep("review", ctx.hits, ctx)
        elif isinstance(ctx, HeldContext) and ctx.held:
            self._keep("held_review", ctx.held, ctx)
        return self.inner.complete(request)

    def _keep(self, purpose, hits, ctx) -> None:
        x = features(hits, ctx)
        bucket = getattr(self._local, "rows", None)
        if bucket is None:
            bucket = self._local.rows = []
        bucket.extend((purpose, h.doc_id, row) for h, row in zip(hits, x))

    def take_rows(self) -> list[tuple[str, str, np.ndarray]]:
        """The rows recorded by this thread since the last call (one question at a time)."""
        rows = getattr(self._local, "rows", None) or []
        self._local.rows = []
        return rows


def collect(retriever, questions: Sequence[EvalQuestion], provider: Provider,
            params: LoopParams, concurrency: int = 2, progress=None) -> JudgeData:
    """Run the loop on every question and label what its reviewer was shown."""
    from tasks.query.loop import answer_question

    recorder = RecordingProvider(provider)

    def one(q: EvalQuestion):
        answer_question(retriever, q.question, recorder, params)
        return q, recorder.take_rows()

    X, y, qid, doc, purpose = [], [], [], [], []
    for q, rows in bounded_map(one, questions, concurrency):
        gold = set(q.gold_ids)
        for p, d, x in rows:
            X.append(x)
            y.append(d in gold)
            qid.append(q.question_id)
            doc.append(d)
            purpose.append(p)
        if progress is not None:
            progress()
    return JudgeData(np.asarray(X, np.float32).reshape(-1, len(FEATURES)), np.asarray(y, bool),
                     np.asarray(qid, object), np.asarray(doc, object), np.asarray(purpose, object))


def gold_groups(questions: Sequence[EvalQuestion]) -> dict[str, int]:
    """question_id → group: connected components of questions linked by a shared gold doc."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for q in questions:
        for g in q.gold_ids[1:]:
            parent[root(g)] = root(q.gold_ids[0])
    roots: dict[str, int] = {}
    return {q.question_id: roots.setdefault(root(q.gold_ids[0]), len(roots)) for q in questions}


def gold_folds(questions: Sequence[EvalQuestion], k: int = 5) -> dict[str, int]:
    """question_id → fold in 0..k-1, whole gold groups per fold, folds of similar size
    (largest groups placed first, each in the currently smallest fold; deterministic)."""
    groups = gold_groups(questions)
    members: dict[int, list[str]] = {}
    for qid, g in groups.items():
        members.setdefault(g, []).append(qid)
    sizes = [0] * k
    fold_of: dict[str, int] = {}
    for g in sorted(members, key=lambda g: (-len(members[g]), g)):
        f = min(range(k), key=lambda i: (sizes[i], i))
        sizes[f] += len(members[g])
        for qid in members[g]:
            fold_of[qid] = f
    return fold_of
