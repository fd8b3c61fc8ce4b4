"""The systems compared: three retrieval baselines and the TRACE loop, one interface.

Every system answers a question with a ranked document list; `trace` also reports what the
loop accepted, held, rejected and saw, which miss attribution follows.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any, Protocol

from tasks.query.retriever import Retriever

SYSTEMS = ("bm25", "dense", "hybrid", "trace")


@dataclass
class SystemAnswer:
    ranked: list[str]
    scores: list[float] | None = None  # None: the order is the ranking (no tie information)
    accepted: list[str] | None = None  # None for the baselines, which accept nothing
    held: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    retrieved: list[str] = field(default_factory=list)
    cost: dict[str, float] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    error: str | None = None


class System(Protocol):
    name: str
    accepts: bool  # whether answers carry an accepted set (the loop) or only a ranking

    def prepare(self, retriever: Retriever, questions: list[str]) -> None:
        """Work that batches across questions (query embeddings), done before answering."""

    def answer(self, retriever: Retriever, question: str) -> SystemAnswer: ...


@dataclass
class Baseline:
    """bm25 / dense: one channel max-pooled; hybrid: the warm-start fusion, no agent."""

    name: str
    depth: int
    accepts: bool = False

    def prepare(self, retriever: Retriever, questions: list[str]) -> None:
        if self.name in ("dense", "hybrid"):
            retriever.prime(questions)

    def answer(self, retriever: Retriever, question: str) -> SystemAnswer:
        t0 = time.perf_counter()
        if self.name == "bm25":
            hits = retriever.bm25_docs(question, self.depth)
            ranked, scores = [h.doc_id for h in hits], [h.score for h in hits]
        elif self.name == "dense":
            hits = retriever.dense_docs(question, self.depth)
            ranked, scores = [h.doc_id for h in hits], [h.score for h in hits]
        elif self.name == "hybrid":
            fused = retriever.warm_start(question, self.depth)
            ranked, scores = [h.doc_id for h in fused], [h.fused_score for h in fused]
        else:
            raise ValueError(f"unknown baseline {self.name!r}")
        return SystemAnswer(ranked=ranked, scores=scores,
                            cost={"framework_s": time.perf_counter() - t0})


@dataclass
class Trace:
    """The full TRACE loop (tasks.query.loop.answer_question) with one provider; each
    question gets a fresh ledger (its own call and token budget)."""

    provider: Any
    params: Any
    new_ledger: Callable[[], Any]
    name: str = "trace"
    accepts: bool = True

    def prepare(self, retriever: Retriever, questions: list[str]) -> None:
        pass  # the loop's queries are not known in advance

    def answer(self, retriever: Retriever, question: str) -> SystemAnswer:
        from tasks.query.loop import answer_question

        package = answer_question(retriever, question, self.provider, self.params,
                                  ledger=self.new_ledger())
        docs = sorted(package.documents, key=lambda d: d.rank)
        cost = package.cost
        return SystemAnswer(
            ranked=[d.doc_id for d in docs], accepted=list(package.accepted),
            held=list(package.held), rejected=list(package.rejected_docs),
            retrieved=list(package.retrieved), flags=list(package.flags),
            cost={"llm_calls": cost.llm_calls, "tokens_in": cost.tokens_in,
                  "tokens_out": cost.tokens_out, "model_s": cost.model_s,
                  "framework_s": cost.framework_s})
