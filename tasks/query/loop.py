"""TRACE for one question, in the order of ARCHITECTURE §3: the sub-questions (plan, then per
sub-question warm start, agent loop, held review, briefing, replan) → merge and rank → the
evidence package → the query record.

Sub-questions run in order because each briefing feeds the replanner and the next one;
questions are independent (every call is stateless) and run concurrently in `answer_many`.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from schemas.embedding import EmbeddingInputTooLong
from schemas.query import (ChannelResult, Cost, EvidencePackage, JudgeInfo, LlmCallRecord,
                           LoopParams, Question, QueryRecord, RankedDocument, SubQuestion)
from schemas.retrieval import FusedHit, Principal, WarmRanks
from tasks.llm.base import BudgetExhausted, Ledger, Provider, ProviderError
from tasks.query.agent import AgentState, QuestionContext, run_agent
from tasks.query.briefing import brief
from tasks.query.evidence import document
from tasks.query.held import reevaluate_held
from tasks.query.lineage import LineageLookup, lineage_for
from tasks.query.planner import plan
from tasks.query.record import new_query_id, write_record
from tasks.query.replanner import replan
from tasks.query.rerank import Candidate, backfill, groups, merge, rank_accepted
from tasks.query.tools import SearchBackend, TimedBackend
from tasks.store.layout import StoreLayout

__all__ = ["LoopParams", "answer_question", "answer_many"]

log = logging.getLogger(__name__)

DEGRADING = ("provider_error", "llm_budget_exhausted", "plan_fallback", "invalid_output")


@dataclass
class SubQuestionsRun:
    """What the sub-questions produced: their states and every call and warm start made."""

    states: list[AgentState] = field(default_factory=list)
    executed: list[SubQuestion] = field(default_factory=list)
    plan_calls: list[LlmCallRecord] = field(default_factory=list)
    calls: list[LlmCallRecord] = field(default_factory=list)  # held review, briefing, replan
    warm_records: list[ChannelResult] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


@dataclass
class Ranking:
    """The merged answer: accepted documents in final order, then the backfilled ones."""

    ranked: list[Candidate]
    final: list[str]
    calls: list[LlmCallRecord]
    flags: list[str]

    @property
    def accepted(self) -> list[str]:
        return [c.doc_id for c in self.ranked]


def answer_question(retriever: SearchBackend, question: str, provider: Provider,
                    params: LoopParams, *, question_id: str | None = None,
                    layout: StoreLayout | None = None,
                    principal: Principal | dict[str, Any] | None = None,
                    ledger: Ledger | None = None) -> EvidencePackage:
    """Answer one question with TRACE. With `layout`, the query record is written under
    layout.queries and its path is the package's `record`; lineage (revision, digest, boxes)
    is read from the generation when `layout` is given."""
    started = time.perf_counter()
    retriever = TimedBackend(retriever)
    ctx = QuestionContext(question=question, backend=retriever, provider=provider,
                          ledger=ledger or Ledger(), params=params,
                          corpora=list(retriever.corpora()))
    run = run_sub_questions(ctx)
    ranking = merge_and_rank(ctx, run)
    package = evidence_package(ctx, run, ranking, _lineage(layout, retriever.generation),
                               question_id, started)
    if layout is not None:
        package.query_id = new_query_id(question)  # the reading room's /queries/<query_id>
        record = query_record(ctx, run, ranking, package, _principal(principal, retriever))
        package.record = str(write_record(layout, record))
    return package


# ---- 1. sub-questions ---------------------------------------------------------------------------

def run_sub_questions(ctx: QuestionContext) -> SubQuestionsRun:
    """Plan, then each sub-question in turn; a spent budget or a failing provider stops the
    sequence with a flag, and what was found so far still counts."""
    run = SubQuestionsRun()
    try:
        run.warm_records.append(question_warm_start(ctx))
        queue, record, flags = plan(ctx)
        run.plan_calls.append(record)
        run.flags += flags
        while queue and len(run.states) < ctx.params.max_sub_questions:
            queue = run_one(ctx, run, queue.pop(0), queue)
    except BudgetExhausted as exc:
        log.warning("question %r: %s", ctx.question[:60], exc)
        run.flags.append("llm_budget_exhausted")
    except ProviderError as exc:
        log.error("question %r: %s", ctx.question[:60], exc)
        run.flags.append("provider_error")
    return run


def question_warm_start(ctx: QuestionContext) -> ChannelResult:
    """The whole question's own warm start (what the `hybrid` baseline returns): below the
    accepted set it joins the sub-questions' lists, so splitting the question never costs the
    ranking a plain fusion of the question would give; the judge reads it as a feature."""
    try:
        fused = ctx.backend.warm_start(ctx.question, ctx.params.warm_k)
    except EmbeddingInputTooLong as exc:
        raise EmbeddingInputTooLong(f"{exc}: shorten the question (it is refused, never "
                                    "truncated)") from None
    ctx.set_question_ranking([RankedDocument(doc_id=f.doc_id, corpus=f.corpus, date=f.date,
                                             rank=f.rank) for f in fused])
    return _warm_record(ctx.question, ctx.params.warm_k, None, None, fused, [])


def run_one(ctx: QuestionContext, run: SubQuestionsRun, sq: SubQuestion,
            queue: list[SubQuestion]) -> list[SubQuestion]:
    """Warm start, agent loop, held review, briefing and replan of one sub-question; returns
    the sub-questions still to run."""
    state = AgentState(index=len(run.states), sub_question=sq)
    run.states.append(state)
    ctx.states.append(state)
    run.executed.append(sq)
    try:
        run.warm_records.append(warm_start(ctx, state))
    except EmbeddingInputTooLong as exc:  # a planner's sub-question over the encoder's limit
        log.warning("sub-question %d skipped: %s", state.index, exc)
        state.flags.add("sub_question_too_long")
        return queue
    run_agent(ctx, state)
    if (record := reevaluate_held(ctx, state)) is not None:
        run.calls.append(record)
    briefing, record = brief(ctx, state)
    run.calls.append(record)
    ctx.briefings.append(briefing)
    if ctx.params.replan and len(run.states) < ctx.params.max_sub_questions:
        done = [(s.sub_question, len(s.accepted)) for s in run.states]
        queue, record, cut = replan(ctx, done, queue, ctx.briefings)
        run.calls.append(record)
        if cut:
            run.flags.append("replan_capped")
    return queue


def warm_start(ctx: QuestionContext, state: AgentState) -> ChannelResult:
    """Fused BM25 + dense (+ temporal when the sub-question has a date) over the target
    sub-corpus; the best chunks of the top documents are the agent's first review."""
    sq, p = state.sub_question, ctx.params
    date = sq.dates[0] if sq.dates else None
    fused = ctx.backend.warm_start(sq.text, p.warm_k, sq.target_corpus, date)
    for f in fused:
        state.warm[f.doc_id] = WarmRanks(bm25=f.ranks.get("bm25"), dense=f.ranks.get("dense"),
                                         temporal=f.ranks.get("temporal"), fused=f.rank,
                                         score=round(f.fused_score, 6))
        state.warm_order.append(f.doc_id)
        state.warm_chunk[f.doc_id] = f.best_chunk_id
    pending = []
    for f in fused[:p.review_k]:
        h = ctx.backend.chunk(f.best_chunk_id).found_by("warm")
        h.rank, h.score, h.warm = f.rank, f.fused_score, state.warm[f.doc_id]
        state.retrieved.setdefault(h.doc_id, h)
        pending.append(h)
    state.pending = pending
    return _warm_record(sq.text, p.warm_k, sq.target_corpus, date, fused,
                        [h.chunk_id for h in pending])


def _warm_record(query: str, k: int, corpus: str | None, date: str | None,
                 fused: list[FusedHit], shown: list[str]) -> ChannelResult:
    return ChannelResult(tool="warm_start", args={"query": query, "k": k, "corpus": corpus,
                                                  "date": date},
                         hits=[{"doc_id": f.doc_id, "rank": f.rank, "score": f.fused_score,
                                "ranks": f.ranks, "chunk_id": f.best_chunk_id,
                                "corpus": f.corpus, "date": f.date} for f in fused],
                         shown=shown)


# ---- 2. merge and rank ------------------------------------------------------------------------

def merge_and_rank(ctx: QuestionContext, run: SubQuestionsRun) -> Ranking:
    """Confirmation groups (ties ordered by one call), truncated to final_k, then backfill by
    warm-start support."""
    p = ctx.params
    question = ctx.question_ranking if p.backfill else []
    cands = merge(run.states, question, p.question_weight)
    flags: list[str] = []
    try:
        ranked, calls = rank_accepted(ctx, cands)
    except (BudgetExhausted, ProviderError) as exc:  # keep the deterministic group order
        ranked, calls = [c for g in groups(cands) for c in g], []
        flags.append("rerank_skipped")
        log.warning("rerank skipped: %s", exc)
    accepted = [c.doc_id for c in ranked]
    final = accepted[:p.final_k]
    if len(accepted) > p.final_k:
        flags.append("truncated")
    if p.backfill:
        final += backfill(run.states, set(final), p.final_k - len(final), question,
                          p.question_weight)
    if len(accepted) < p.too_few:
        flags.append("too_few_results")
    return Ranking(ranked=ranked, final=final, calls=calls, flags=flags)


# ---- 3. evidence package ----------------------------------------------------------------------

def evidence_package(ctx: QuestionContext, run: SubQuestionsRun, ranking: Ranking,
                     lineage: LineageLookup | None, question_id: str | None,
                     started: float) -> EvidencePackage:
    states, accepted = run.states, ranking.accepted
    _ensure_seen(ctx.backend, states, ranking.final)
    by_doc = {c.doc_id: c for c in ranking.ranked}
    documents = [document(n, d, states, by_doc.get(d), lineage)
                 for n, d in enumerate(ranking.final, 1)]
    held = {h.doc_id for st in states for h, _ in st.held.values()} - set(accepted)
    rejected_docs = ({v.doc_id for st in states for v in st.rejected.values()}
                     - set(accepted) - held)
    retrieved = list(dict.fromkeys(d for st in states for d in [*st.warm_order, *st.retrieved]))
    return EvidencePackage(
        question=ctx.question, question_id=question_id, generation=ctx.backend.generation,
        space_id=ctx.backend.space_id, provider=ctx.provider.name, model=ctx.provider.model,
        documents=documents, accepted=accepted, held=sorted(held),
        rejected=sorted({c for st in states for c in st.rejected}),
        rejected_docs=sorted(rejected_docs), retrieved=retrieved, plan=run.executed,
        briefings=ctx.briefings, flags=_flags(ctx, run, ranking), cost=_cost(ctx, started),
        judge=_judge(ctx.provider), route=getattr(ctx.backend, "route", None),
        as_of=getattr(ctx.backend, "as_of", None))


def _flags(ctx: QuestionContext, run: SubQuestionsRun, ranking: Ranking) -> list[str]:
    # how the generation was searched, when not as its manifest records (an index missing)
    flags = [*getattr(ctx.backend, "index_flags", ()), *run.flags, *ranking.flags]
    for st in run.states:
        flags += sorted(st.flags)
    flags += sorted(ctx.flags)
    if any(c.error and c.output is None for c in [*run.plan_calls, *run.calls, *ranking.calls]):
        flags.append("invalid_output")  # a call's output stayed invalid after its re-asks
    if getattr(ctx.provider, "fallback_reason", None):
        flags.append("judge_fallback_rules")  # the learned judge could not be loaded
    if any(f in flags for f in DEGRADING):
        flags.append("degraded")
    return list(dict.fromkeys(flags))


def _cost(ctx: QuestionContext, started: float) -> Cost:
    total, ledger, backend = time.perf_counter() - started, ctx.ledger, ctx.backend
    return Cost(llm_calls=ledger.calls, tokens_in=ledger.tokens_in, tokens_out=ledger.tokens_out,
                model_s=round(ledger.model_s, 4), framework_s=round(total - ledger.model_s, 4),
                retrieval_s=round(backend.seconds, 4), retrieval_calls=backend.calls,
                total_s=round(total, 4))


def _judge(provider: Provider) -> JudgeInfo | None:
    judge = getattr(provider, "judge", None)
    return judge if isinstance(judge, JudgeInfo) else None


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
                hit = backend.chunk(st.warm_chunk[doc]).found_by("warm")
                hit.rank = st.warm[doc].fused or hit.rank
                st.retrieved[doc] = hit
                break


# ---- 4. query record --------------------------------------------------------------------------

def query_record(ctx: QuestionContext, run: SubQuestionsRun, ranking: Ranking,
                 package: EvidencePackage, principal: Principal | None) -> QueryRecord:
    return QueryRecord(
        query_id=package.query_id, created_at=datetime.now(timezone.utc).isoformat(),
        question=Question(question=ctx.question, question_id=package.question_id),
        principal=principal, generation=package.generation, space_id=package.space_id,
        provider=package.provider, model=package.model, judge=package.judge, params=ctx.params,
        plan_calls=run.plan_calls, sub_questions=run.executed, warm_starts=run.warm_records,
        steps=[s for st in run.states for s in st.steps], calls=[*run.calls, *ranking.calls],
        briefings=ctx.briefings, final=ranking.final, flags=package.flags, cost=package.cost,
        documents=package.documents, route=package.route, as_of=package.as_of)


def _principal(given: Principal | dict[str, Any] | None, backend: SearchBackend) -> Principal | None:
    if isinstance(given, dict):
        return Principal.model_validate(given)
    if given is not None:
        return given
    principal = getattr(backend, "principal", None)
    return principal if isinstance(principal, Principal) else None


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
