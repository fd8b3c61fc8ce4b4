"""TRACE for one question: plan → per sub-question (warm start, agent loop, held review,
briefing, replan) → merge and count-grouped rerank → evidence package and query record.

Sub-questions run in order because each briefing feeds the replanner and the next one;
questions are independent (every call is stateless) and run concurrently in `answer_many`.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

from schemas.query import (ChannelResult, Cost, EvidencePackage, LlmCallRecord, LoopParams,
                           Question, QueryRecord, SubQuestion)
from tasks.llm.base import BudgetExhausted, Ledger, Provider, ProviderError
from tasks.query.agent import AgentState, QuestionContext, run_agent
from tasks.query.briefing import brief
from tasks.query.evidence import document
from tasks.query.held import reevaluate_held
from tasks.query.lineage import LineageLookup, lineage_for
from tasks.query.planner import plan
from tasks.query.record import new_query_id, write_record
from tasks.query.replanner import replan
from tasks.query.rerank import backfill, merge, rank_accepted
from tasks.query.tools import Hit, SearchBackend, TimedBackend
from tasks.store.layout import StoreLayout

__all__ = ["LoopParams", "answer_question", "answer_many"]

log = logging.getLogger(__name__)


def warm_start(ctx: QuestionContext, state: AgentState) -> ChannelResult:
    """Fused BM25 + dense (+ temporal when the sub-question has a date) over the target
    sub-corpus; the best chunks of the top documents are the agent's first review."""
    sq, p = state.sub_question, ctx.params
    date = sq.dates[0] if sq.dates else None
    fused = ctx.backend.warm_start(sq.text, p.warm_k, sq.target_corpus, date)
    for f in fused:
        state.warm[f.doc_id] = {**f.ranks, "fused": f.rank}
        state.warm_order.append(f.doc_id)
        state.warm_chunk[f.doc_id] = f.best_chunk_id
    pending = []
    for f in fused[:p.review_k]:
        h = Hit.of(ctx.backend.chunk(f.best_chunk_id), "warm")
        h.rank, h.score, h.warm = f.rank, f.fused_score, state.warm[f.doc_id]
        state.retrieved.setdefault(h.doc_id, h)
        pending.append(h)
    state.pending = pending
    return ChannelResult(tool="warm_start",
                         args={"query": sq.text, "k": p.warm_k, "corpus": sq.target_corpus,
                               "date": date},
                         hits=[{"doc_id": f.doc_id, "rank": f.rank, "score": f.fused_score,
                                "ranks": f.ranks, "chunk_id": f.best_chunk_id,
                                "corpus": f.corpus, "date": f.date} for f in fused],
                         shown=[h.chunk_id for h in pending])


def answer_question(retriever: SearchBackend, question: str, provider: Provider,
                    params: LoopParams, *, question_id: str | None = None,
                    layout: StoreLayout | None = None, principal: dict[str, Any] | None = None,
                    ledger: Ledger | None = None) -> EvidencePackage:
    """Answer one question with TRACE. With `layout`, the query record is written under
    layout.queries and its path is the package's `record`; lineage (revision, digest, boxes)
    is read from the generation when `layout` is given."""
    started = time.perf_counter()
    ledger = ledger or Ledger()
    retriever = TimedBackend(retriever)
    ctx = QuestionContext(question=question, backend=retriever, provider=provider, ledger=ledger,
                          params=params, corpora=list(retriever.corpora()))
    flags: list[str] = []
    states: list[AgentState] = []
    warm_records: list[ChannelResult] = []
    calls: list[LlmCallRecord] = []
    plan_calls: list[LlmCallRecord] = []
    executed: list[SubQuestion] = []
    question_warm: list[str] = []
    try:
        if params.backfill:
            # The whole question's own warm start (what the `hybrid` baseline returns): below
            # the accepted set it joins the sub-questions' lists, so splitting the question
            # never costs the ranking a plain fusion of the question would give.
            fused = retriever.warm_start(question, params.warm_k)
            question_warm = [f.doc_id for f in fused]
            warm_records.append(ChannelResult(
                tool="warm_start", args={"query": question, "k": params.warm_k, "corpus": None, "date": None},
                hits=[{"doc_id": f.doc_id, "rank": f.rank, "score": f.fused_score, "ranks": f.ranks,
                       "chunk_id": f.best_chunk_id, "corpus": f.corpus, "date": f.date} for f in fused],
                shown=[]))
        queue, plan_record, plan_flags = plan(ctx)
        plan_calls.append(plan_record)
        flags += plan_flags
        while queue and len(states) < params.max_sub_questions:
            sq = queue.pop(0)
            state = AgentState(index=len(states), sub_question=sq)
            states.append(state)
            executed.append(sq)
            warm_records.append(warm_start(ctx, state))
            run_agent(ctx, state)
            if (record := reevaluate_held(ctx, state)) is not None:
                calls.append(record)
            briefing, record = brief(ctx, state)
            calls.append(record)
            ctx.briefings.append(briefing)
            if params.replan and len(states) < params.max_sub_questions:
                done = [(s.sub_question, len(s.accepted)) for s in states]
                queue, record, cut = replan(ctx, done, queue, ctx.briefings)
                calls.append(record)
                if cut:
                    flags.append("replan_capped")
    except BudgetExhausted as exc:
        log.warning("question %r: %s", question[:60], exc)
        flags.append("llm_budget_exhausted")
    except ProviderError as exc:
        log.error("question %r: %s", question[:60], exc)
        flags.append("provider_error")

    cands = merge(states, question_warm, params.question_weight)
    try:
        ranked, rerank_calls = rank_accepted(ctx, cands)
    except (BudgetExhausted, ProviderError) as exc:  # keep the deterministic group order
        from tasks.query.rerank import groups
        ranked, rerank_calls = [c for g in groups(cands) for c in g], []
        flags.append("rerank_skipped")
        log.warning("rerank skipped: %s", exc)
    calls += rerank_calls
    accepted_ids = [c.doc_id for c in ranked]
    final = accepted_ids[:params.final_k]
    if len(accepted_ids) > params.final_k:
        flags.append("truncated")
    if params.backfill:
        final += backfill(states, set(final), params.final_k - len(final), question_warm,
                          params.question_weight)
    if len(accepted_ids) < params.too_few:
        flags.append("too_few_results")
    for st in states:
        flags += sorted(st.flags)
    if any(f in flags for f in ("provider_error", "llm_budget_exhausted", "plan_fallback")):
        flags.append("degraded")
    flags = list(dict.fromkeys(flags))

    lineage = _lineage(layout, retriever.generation)
    by_doc = {c.doc_id: c for c in ranked}
    _ensure_seen(retriever, states, final)
    documents = [document(n, d, states, by_doc.get(d), lineage) for n, d in enumerate(final, 1)]

    held_docs = {h.doc_id for st in states for h, _ in st.held.values()} - set(accepted_ids)
    rejected = sorted({c for st in states for c in st.rejected})
    rejected_docs = ({v.doc_id for st in states for v in st.rejected.values()}
                     - set(accepted_ids) - held_docs)
    retrieved = list(dict.fromkeys(d for st in states for d in [*st.warm_order, *st.retrieved]))
    total = time.perf_counter() - started
    cost = Cost(llm_calls=ledger.calls, tokens_in=ledger.tokens_in, tokens_out=ledger.tokens_out,
                model_s=round(ledger.model_s, 4), framework_s=round(total - ledger.model_s, 4),
                retrieval_s=round(retriever.seconds, 4), retrieval_calls=retriever.calls,
                total_s=round(total, 4))
    package = EvidencePackage(
        question=question, question_id=question_id, generation=retriever.generation,
        space_id=retriever.space_id, provider=provider.name, model=provider.model,
        documents=documents, accepted=accepted_ids, held=sorted(held_docs), rejected=rejected,
        rejected_docs=sorted(rejected_docs), retrieved=retrieved, plan=executed,
        briefings=ctx.briefings, flags=flags, cost=cost,
        route=getattr(retriever, "route", None), as_of=getattr(retriever, "as_of", None))
    if layout is not None:
        record = QueryRecord(
            query_id=new_query_id(question), created_at=datetime.now(timezone.utc).isoformat(),
            question=Question(question=question, question_id=question_id),
            principal=principal or _principal_of(retriever), generation=retriever.generation,
            space_id=retriever.space_id, provider=provider.name, model=provider.model,
            params=params.model_dump(), plan_calls=plan_calls, sub_questions=executed,
            warm_starts=warm_records, steps=[s for st in states for s in st.steps], calls=calls,
            briefings=ctx.briefings, final=final, flags=flags, cost=cost,
            route=package.route, as_of=package.as_of)
        package.record = str(write_record(layout, record))
    return package


def _lineage(layout: StoreLayout | None, generation: str) -> LineageLookup | None:
    if layout is None:
        return None
    try:
        return lineage_for(layout, generation)
    except FileNotFoundError:
        log.warning("no Parquet lineage for generation %s; revisions and boxes left empty",
                    generation)
        return None


def _ensure_seen(backend: SearchBackend, states: list[AgentState], docs: list[str]) -> None:
    """Backfilled documents were ranked but never fetched: fetch the chunk they are cited by."""
    for doc in docs:
        if any(doc in st.retrieved for st in states):
            continue
        for st in states:
            if doc in st.warm_chunk:
                hit = Hit.of(backend.chunk(st.warm_chunk[doc]), "warm")
                hit.rank = st.warm[doc]["fused"] or hit.rank
                st.retrieved[doc] = hit
                break


def _principal_of(backend: SearchBackend) -> dict[str, Any]:
    principal = getattr(backend, "principal", None)
    return principal.model_dump() if hasattr(principal, "model_dump") else {}


def answer_many(retriever: SearchBackend, questions: list[Question], provider: Provider,
                params: LoopParams, *, concurrency: int = 4, layout: StoreLayout | None = None,
                budget: tuple[int, int] | None = None) -> list[EvidencePackage]:
    """Independent questions concurrently (bounded); each gets its own ledger."""
    def one(q: Question) -> EvidencePackage:
        ledger = Ledger(*budget) if budget else Ledger()
        return answer_question(retriever, q.question, provider, params,
                               question_id=q.question_id, layout=layout, ledger=ledger)
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(one, questions))
