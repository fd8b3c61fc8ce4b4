"""Merge the sub-questions' acceptances and rank them by confirmation count.

Confirmations = how many sub-questions accepted a document. Groups go in decreasing count;
inside a group of two or more, one call orders the tie from the agent's own rationales;
a singleton passes through. Below the accepted documents come the others: first those the
reviewer judged with a confidence (the learned judge), by it; then the rest by their warm-start
support — reciprocal-rank fusion of the sub-questions' warm-start lists, so a document several
sub-questions surfaced ranks above one only one did (measured better than interleaving the
lists, docs/benchmarks.md) and rejecting or missing a document never costs the recall the warm
start already had.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from schemas.query import (BriefedDocument, LlmCallRecord, RerankCandidate,
                           RerankContext, RerankOutput)
from schemas.retrieval import Hit
from tasks.query import prompts
from tasks.query.agent import AgentState, warm_support
from tasks.query.calls import recorded_call


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
    probability: float | None = None  # the reviewer's best confidence, when it gave one

    @property
    def confirmations(self) -> int:
        return len(set(self.sub_questions))

    def view(self) -> RerankCandidate:
        return RerankCandidate(doc_id=self.doc_id, corpus=self.corpus, date=self.date,
                               rationales=self.rationales[:4], sub_questions=self.sub_questions,
                               positions=self.positions, fused=self.fused,
                               support=round(self.support, 5), probability=self.probability)


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
            probs = [v.probability for _, v in pairs if v.probability is not None]
            if probs:
                c.probability = max([*probs, c.probability or 0.0])
    support = warm_support(states, question_ranking, question_weight)
    for st in states:
        for doc, ranks in st.warm.items():
            if doc in cands and ranks.fused is not None:
                f = ranks.fused
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
    context = RerankContext(
        question=ctx.question, candidates=[c.view() for c in group],
        accepted=[BriefedDocument(doc_id=c.doc_id, corpus=c.corpus, date=c.date)
                  for c in cands.values()])
    messages = prompts.rerank_messages(context)
    value, record = recorded_call(ctx, "rerank", messages, context)
    out: RerankOutput | None = value
    by_id = {c.doc_id: c for c in group}
    ordered: list[Candidate] = []
    for doc in (out.order if out is not None else []):
        if doc not in by_id:
            ctx.flags.add("unknown_document_in_output")  # an id it was not given: ignored
        elif by_id[doc] not in ordered:
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


def judged_confidence(states: list[AgentState]) -> dict[str, float]:
    """Each document's best confidence over the latest verdict on each of its chunks (only
    reviewers that give one, such as the learned judge, have any)."""
    best: dict[str, float] = {}
    for st in states:
        verdicts = [v for pairs in st.accepted.values() for _, v in pairs]
        verdicts += [v for _, v in st.held.values()] + list(st.rejected.values())
        for v in verdicts:
            if v.probability is not None:
                best[v.doc_id] = max(best.get(v.doc_id, 0.0), v.probability)
    return best


def backfill(states: list[AgentState], taken: set[str], limit: int,
             question_ranking: list[str] | None = None, question_weight: float = 1.0) -> list[str]:
    """Documents not accepted. Those the reviewer judged with a confidence come first, by that
    confidence (a held passage the judge found likely outranks one merely retrieved); then
    the rest by warm-start support over the sub-questions and, weighted, the whole question's
    own warm-start ranking. Without confidences (rules, most models) the order is support."""
    support = warm_support(states, question_ranking, question_weight)
    confidence = judged_confidence(states)
    pool = set(support) | set(confidence)
    rest = sorted((d for d in pool if d not in taken),
                  key=lambda d: (d not in confidence, -confidence.get(d, 0.0),
                                 -support.get(d, 0.0), d))
    return rest[:max(0, limit)]
