"""Merge the sub-questions' acceptances and rank them by confirmation count.

Confirmations = how many sub-questions accepted a document. Groups go in decreasing count;
inside a group of two or more, one call orders the tie from the agent's own rationales;
a singleton passes through. Below the accepted documents come the others by their warm-start
support — reciprocal-rank fusion of the sub-questions' warm-start lists, so a document several
sub-questions surfaced ranks above one only one did (measured better than interleaving the
lists, docs/benchmarks.md) and rejecting or missing a document never costs the recall the warm
start already had.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from schemas.query import LlmCallRecord, OUTPUT_SCHEMAS
from tasks.query import prompts
from tasks.query.agent import AgentState
from tasks.query.calls import recorded_call
from tasks.query.tools import Hit


@dataclass
class Candidate:
    doc_id: str
    corpus: str | None
    date: str | None
    sub_questions: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)  # order of acceptance in each
    rationales: list[str] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    fused: int | None = None  # best warm-start rank over the sub-questions
    support: float = 0.0  # RRF of its warm-start ranks over the sub-questions

    @property
    def confirmations(self) -> int:
        return len(set(self.sub_questions))


SUPPORT_K = 60  # the RRF constant of the warm start itself


def warm_support(states: list[AgentState], question_ranking: list[str] | None = None,
                 question_weight: float = 1.0) -> dict[str, float]:
    """RRF over the sub-questions' warm starts and, weighted, the whole question's own."""
    support: dict[str, float] = {}
    for st in states:
        for doc, ranks in st.warm.items():
            if ranks.get("fused") is not None:
                support[doc] = support.get(doc, 0.0) + 1.0 / (SUPPORT_K + ranks["fused"])
    for rank, doc in enumerate(question_ranking or [], start=1):
        support[doc] = support.get(doc, 0.0) + question_weight / (SUPPORT_K + rank)
    return support


def merge(states: list[AgentState], question_ranking: list[str] | None = None,
          question_weight: float = 1.0) -> dict[str, Candidate]:
    cands: dict[str, Candidate] = {}
    for st in states:
        for pos, (doc, pairs) in enumerate(st.accepted.items(), start=1):
            first = pairs[0][0]
            c = cands.setdefault(doc, Candidate(doc, first.corpus, first.date))
            c.sub_questions.append(st.index)
            c.positions.append(pos)
            c.rationales += [v.rationale for _, v in pairs if v.rationale]
            c.hits += [h for h, _ in pairs if h.chunk_id not in {x.chunk_id for x in c.hits}]
    support = warm_support(states, question_ranking, question_weight)
    for st in states:
        for doc, ranks in st.warm.items():
            if doc in cands and ranks.get("fused") is not None:
                f = ranks["fused"]
                cands[doc].fused = f if cands[doc].fused is None else min(cands[doc].fused, f)
    for doc, c in cands.items():
        c.support = support.get(doc, 0.0)
    return cands


def groups(cands: dict[str, Candidate]) -> list[list[Candidate]]:
    """Confirmation groups, highest count first; inside, acceptance order then warm rank."""
    by_count: dict[int, list[Candidate]] = {}
    for c in cands.values():
        by_count.setdefault(c.confirmations, []).append(c)
    return [sorted(by_count[n], key=lambda c: (-c.support, min(c.positions), c.doc_id))
            for n in sorted(by_count, reverse=True)]


def order_tie(ctx, group: list[Candidate], cands: dict[str, Candidate]) -> tuple[list[Candidate], LlmCallRecord]:
    view = [{"doc_id": c.doc_id, "corpus": c.corpus, "date": c.date,
             "rationales": c.rationales[:4], "sub_questions": c.sub_questions,
             "positions": c.positions, "fused": c.fused, "support": round(c.support, 5)}
            for c in group]
    messages = prompts.rerank_messages(ctx.question, view, OUTPUT_SCHEMAS["rerank"])
    context = {"question": ctx.question, "candidates": view,
               "accepted_dates": {c.doc_id: (c.corpus, c.date) for c in cands.values()}}
    value, record = recorded_call(ctx, "rerank", messages, context)
    by_id = {c.doc_id: c for c in group}
    ordered: list[Candidate] = []
    for doc in (value or {}).get("order", []):
        if doc in by_id and by_id[doc] not in ordered:
            ordered.append(by_id[doc])
    # a model that drops or invents ids cannot lose a document: the rest keep their order
    ordered += [c for c in group if c not in ordered]
    return ordered, record


def rank_accepted(ctx, cands: dict[str, Candidate]) -> tuple[list[Candidate], list[LlmCallRecord]]:
    ranked: list[Candidate] = []
    records: list[LlmCallRecord] = []
    for group in groups(cands):
        if len(group) >= 2:
            ordered, record = order_tie(ctx, group, cands)
            ranked += ordered
            records.append(record)
        else:
            ranked += group
    return ranked, records


def backfill(states: list[AgentState], taken: set[str], limit: int,
             question_ranking: list[str] | None = None, question_weight: float = 1.0) -> list[str]:
    """Documents not accepted, by warm-start support over the sub-questions and, weighted,
    the whole question's own warm-start ranking."""
    support = warm_support(states, question_ranking, question_weight)
    rest = sorted((d for d in support if d not in taken), key=lambda d: (-support[d], d))
    return rest[:max(0, limit)]
