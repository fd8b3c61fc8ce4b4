"""The agent loop of one sub-question: strict search/review alternation within a budget.

State is an `AgentState`; every step is one stateless provider call whose JSON output is
validated before it changes anything. What counts as a step, and what ends the loop:

- effective steps (productive searches and reviews) count against `step_budget`;
- a duplicate search, an empty result or an unparseable output is skipped with feedback and
  does not count — `max_raw_steps` bounds those;
- a search identical to the previous search attempt ends the loop;
- a search is only started when a review can follow it within the budget.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from schemas.embedding import EmbeddingInputTooLong
from schemas.query import (AgentStep, BriefedDocument, Briefing, ChannelResult, LoopParams,
                           Memory, RankedDocument, ReviewContext, ReviewStep,
                           SearchRecord, SearchStep, StepContext, SubQuestion, Verdict)
from schemas.retrieval import Hit, WarmRanks
from tasks.llm.base import (BudgetExhausted, InvalidOutput, Ledger, LlmRequest, LlmResult,
                            Provider, ProviderError, T, call_validated)
from tasks.query import prompts
from tasks.query.memory import Action, replace_memory
from tasks.query.tools import SearchBackend, ToolError, check_args, run_search, search_key

log = logging.getLogger(__name__)


@dataclass
class AgentState:
    index: int
    sub_question: SubQuestion
    memory: Memory = field(default_factory=Memory.empty)
    actions: list[Action] = field(default_factory=list)
    searches: list[SearchRecord] = field(default_factory=list)
    search_keys: set[str] = field(default_factory=set)
    last_search_key: str | None = None
    effective: int = 0
    raw: int = 0
    pending: list[Hit] = field(default_factory=list)
    reviewed: set[str] = field(default_factory=set)
    accepted: dict[str, list[tuple[Hit, Verdict]]] = field(default_factory=dict)  # in order
    held: dict[str, tuple[Hit, Verdict]] = field(default_factory=dict)
    rejected: dict[str, Verdict] = field(default_factory=dict)
    retrieved: dict[str, Hit] = field(default_factory=dict)  # doc id → first hit seen
    warm: dict[str, WarmRanks] = field(default_factory=dict)
    warm_order: list[str] = field(default_factory=list)
    warm_chunk: dict[str, str] = field(default_factory=dict)  # doc id → its best chunk id
    steps: list[AgentStep] = field(default_factory=list)
    feedback: str | None = None
    stop_reason: str | None = None
    flags: set[str] = field(default_factory=set)

    def budget_left(self, params: LoopParams) -> int:
        return params.step_budget - self.effective


@dataclass
class QuestionContext:
    """What every step of one question shares (read-only during a sub-question)."""

    question: str
    backend: SearchBackend
    provider: Provider
    ledger: Ledger
    params: LoopParams
    corpora: list[str]
    briefings: list[Briefing] = field(default_factory=list)
    states: list[AgentState] = field(default_factory=list)  # sub-questions run so far, in order
    question_ranking: list[str] = field(default_factory=list)  # the whole question's warm start
    flags: set[str] = field(default_factory=set)  # question-level (invalid outputs, bad ids)
    question_candidates: list[RankedDocument] = field(default_factory=list)
    _question_ranks: dict[str, int] = field(default_factory=dict, repr=False)

    def set_question_ranking(self, ranking: list[RankedDocument]) -> None:
        self.question_candidates = list(ranking)
        self.question_ranking = [d.doc_id for d in ranking]
        self._question_ranks = {d.doc_id: d.rank for d in ranking}

    def question_rank(self, doc_id: str) -> int | None:
        return self._question_ranks.get(doc_id)


SUPPORT_K = 60  # the RRF constant of the warm start itself


def warm_support(states: list[AgentState], question_ranking: list[str] | None = None,
                 question_weight: float = 1.0) -> dict[str, float]:
    """RRF over the sub-questions' warm starts and, weighted, the whole question's own."""
    support: dict[str, float] = {}
    for st in states:
        for doc, ranks in st.warm.items():
            if ranks.fused is not None:
                support[doc] = support.get(doc, 0.0) + 1.0 / (SUPPORT_K + ranks.fused)
    for rank, doc in enumerate(question_ranking or [], start=1):
        support[doc] = support.get(doc, 0.0) + question_weight / (SUPPORT_K + rank)
    return support


def hit_views(ctx: QuestionContext, hits: list[Hit]) -> list[Hit]:
    """Copies of the hits with their documents' standing over the whole question, as a policy
    reviews them (the state's own hits are not changed)."""
    support = warm_support(ctx.states, ctx.question_ranking, ctx.params.question_weight)
    return [h.model_copy(update={"question_rank": ctx.question_rank(h.doc_id),
                                 "support": round(support.get(h.doc_id, 0.0), 6)})
            for h in hits]


def accepted_brief(state: AgentState) -> list[BriefedDocument]:
    return [BriefedDocument(doc_id=d, corpus=v[0][0].corpus, date=v[0][0].date)
            for d, v in state.accepted.items()]


def step_context(ctx: QuestionContext, state: AgentState) -> StepContext:
    before = [d for st in ctx.states if st.index < state.index for d in accepted_brief(st)]
    return StepContext(question=ctx.question, sub_question=state.sub_question,
                       briefings=list(ctx.briefings), searches=list(state.searches),
                       accepted=accepted_brief(state), accepted_before=before,
                       question_candidates=ctx.question_candidates,
                       budget_left=state.budget_left(ctx.params), corpora=ctx.corpora,
                       memory=state.memory)


def visible(state: AgentState, hits: list[Hit]) -> list[Hit]:
    """Hits worth showing: not rejected, not already judged, not of an accepted document."""
    out, seen = [], set()
    for h in hits:
        if (h.chunk_id in state.rejected or h.chunk_id in state.reviewed
                or h.doc_id in state.accepted or h.chunk_id in seen):
            continue
        seen.add(h.chunk_id)
        out.append(h)
    return out


def with_warm(state: AgentState, hits: list[Hit]) -> list[Hit]:
    for h in hits:
        h.warm = state.warm.get(h.doc_id)
        state.retrieved.setdefault(h.doc_id, h)
    return hits


def _call(ctx: QuestionContext, purpose: str, messages: list[dict[str, str]],
          context: StepContext, output: type[T]) -> LlmResult[T]:
    request = LlmRequest(purpose, messages, context, output)
    try:
        return call_validated(ctx.provider, request, ctx.ledger, ctx.params.max_retries)
    except InvalidOutput:
        ctx.flags.add("invalid_output")
        raise


def _record(state: AgentState, kind: str, effective: bool, result: LlmResult | None,
            **extra: Any) -> AgentStep:
    step = AgentStep(sub_question=state.index, index=state.raw, kind=kind, effective=effective,
                     memory=state.memory, **extra)
    if result is not None:
        step.prompt_digest = result.prompt_digest
        step.raw_output = result.raw
        step.raw_attempts = result.raws
        step.output = result.value.model_dump(mode="json") if result.value is not None else None
        step.model_s, step.tokens_in, step.tokens_out = (result.model_s, result.tokens_in,
                                                         result.tokens_out)
        step.attempts = result.attempts
    state.steps.append(step)
    return step


def review_step(ctx: QuestionContext, state: AgentState) -> None:
    p = ctx.params
    hits = state.pending
    context = ReviewContext(**dict(step_context(ctx, state)), hits=hit_views(ctx, hits))
    messages = prompts.review_messages(context, state.actions, p.history_actions, state.feedback,
                                       p.snippet_chars)
    try:
        result = _call(ctx, "review", messages, context, ReviewStep)
    except InvalidOutput as exc:
        _skip_invalid(state, exc, "review",
                      f"your review was not valid ({exc.result.error}); review again")
        return
    out = result.value
    by_id = {h.chunk_id: h for h in hits}
    verdicts: list[Verdict] = []
    notes: list[str] = []
    for item in out.args.verdicts:
        hit = by_id.get(item.chunk_id)
        if hit is None or hit.chunk_id in state.reviewed:
            # a passage never shown (or judged twice) changes nothing: no invented document
            notes.append(f"{item.chunk_id[:80]} was not under review")
            ctx.flags.add("unknown_chunk_in_output")
            continue
        verdict = Verdict(chunk_id=hit.chunk_id, doc_id=hit.doc_id, decision=item.verdict,
                          rationale=item.rationale, sub_question=state.index, step=state.raw,
                          probability=item.confidence)
        apply_verdict(state, hit, verdict)
        verdicts.append(verdict)
    for hit in hits:  # a passage the agent skipped is held, not lost
        if hit.chunk_id not in state.reviewed:
            verdict = Verdict(chunk_id=hit.chunk_id, doc_id=hit.doc_id, decision="hold",
                              rationale="not reviewed", sub_question=state.index,
                              step=state.raw, by="auto")
            apply_verdict(state, hit, verdict)
            verdicts.append(verdict)
    state.memory = replace_memory(out.memory_update, state.memory)
    counts = {d: sum(v.decision == d for v in verdicts) for d in ("accept", "hold", "reject")}
    state.actions.append(Action(state.raw, "review", ", ".join(f"{n} {d}" for d, n in counts.items())))
    state.feedback = "; ".join(notes) or None
    state.pending = []
    state.effective += 1
    _record(state, "review", True, result, verdicts=verdicts, purpose="review")


def _skip_invalid(state: AgentState, exc: InvalidOutput, purpose: str, feedback: str) -> None:
    """An invalid review or search output skips the step and tells the model why."""
    state.feedback = feedback
    state.flags.add("invalid_output")
    state.actions.append(Action(state.raw, "skipped", f"invalid {purpose} output"))
    _record(state, "skipped", False, exc.result, feedback=state.feedback, purpose=purpose)


def apply_verdict(state: AgentState, hit: Hit, verdict: Verdict) -> None:
    state.reviewed.add(hit.chunk_id)
    state.retrieved.setdefault(hit.doc_id, hit)
    if verdict.decision == "accept":
        state.held.pop(hit.chunk_id, None)
        # the document is then deduplicated: later chunks of it are not shown again
        state.accepted.setdefault(hit.doc_id, []).append((hit, verdict))
    elif verdict.decision == "reject":
        state.held.pop(hit.chunk_id, None)
        state.rejected[hit.chunk_id] = verdict  # that chunk only; the document stays eligible
    else:
        state.held[hit.chunk_id] = (hit, verdict)


def search_step(ctx: QuestionContext, state: AgentState) -> None:
    p = ctx.params
    context = step_context(ctx, state)
    messages = prompts.search_messages(context, state.actions, p.history_actions, state.feedback)
    try:
        result = _call(ctx, "search", messages, context, SearchStep)
    except InvalidOutput as exc:
        _skip_invalid(state, exc, "search", f"your step was not valid ({exc.result.error})")
        return
    out = result.value
    state.memory = replace_memory(out.memory_update, state.memory)
    tool, args = out.action, out.args.model_dump(exclude_none=True)
    if tool == "finish":
        state.stop_reason = "finished"
        state.actions.append(Action(state.raw, "finish", out.thought[:120]))
        _record(state, "finish", False, result, purpose="search")
        return
    key = search_key(tool, args)
    if key == state.last_search_key:
        # the agent is stuck: the same search twice in a row ends the loop
        state.stop_reason = "repeated_search"
        state.flags.add("repeated_search")
        _record(state, "terminated", False, result, feedback="same search as the previous one",
                purpose="search")
        return
    state.last_search_key = key
    if key in state.search_keys:
        return _skip(state, result, tool, "duplicate of an earlier search; try something else")
    state.search_keys.add(key)
    try:
        checked = check_args(tool, args, ctx.corpora)
    except ToolError as exc:
        return _skip(state, result, tool, str(exc))
    try:
        shown_all, widened = run_search(ctx.backend, tool, checked, p.search_k, p.date_widen_days)
    except EmbeddingInputTooLong as exc:  # refused, not truncated: the model shortens it
        return _skip(state, result, tool, f"query too long for the encoder ({exc}); shorten it")
    state.searches.append(SearchRecord(tool=tool, args=checked))
    shown = visible(state, with_warm(state, shown_all))[:p.review_k]
    silently = _hold_widened(state, with_warm(state, widened))
    channel = ChannelResult(tool=tool, args=checked,
                            hits=[h.summary() for h in shown_all + widened],
                            shown=[h.chunk_id for h in shown],
                            held_silently=[v.chunk_id for v in silently])
    if not shown:
        return _skip(state, result, tool, "no new results; change the query, tool or corpus",
                     channel=channel, verdicts=silently)
    state.pending = shown
    state.effective += 1
    state.feedback = None
    state.actions.append(Action(state.raw, tool, f"{_brief_args(checked)} → {len(shown)} new"))
    _record(state, "search", True, result, channel=channel, verdicts=silently, purpose="search")


def _hold_widened(state: AgentState, hits: list[Hit]) -> list[Verdict]:
    """Hits only the ±days widening found are held, never accepted, and the agent is not told."""
    held = []
    for h in visible(state, hits):
        verdict = Verdict(chunk_id=h.chunk_id, doc_id=h.doc_id, decision="hold",
                          rationale=f"date {h.date} next to the range asked",
                          sub_question=state.index, step=state.raw, by="widening")
        apply_verdict(state, h, verdict)
        held.append(verdict)
    return held


def _skip(state: AgentState, result: LlmResult, tool: str, why: str,
          channel: ChannelResult | None = None, verdicts: list[Verdict] = ()) -> None:
    state.feedback = f"{tool} skipped: {why}"
    state.actions.append(Action(state.raw, "skipped", f"{tool}: {why}"))
    _record(state, "skipped", False, result, feedback=state.feedback, channel=channel,
            verdicts=list(verdicts), purpose="search")


def _brief_args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items() if v not in (None, ""))[:160]


def run_agent(ctx: QuestionContext, state: AgentState) -> AgentState:
    """Alternate review (of pending hits) and search until a stop condition."""
    p = ctx.params
    while state.stop_reason is None:
        if state.raw >= p.max_raw_steps:
            state.stop_reason = "step_ceiling"
            state.flags.add("step_ceiling")
            break
        reviewing = bool(state.pending)
        if state.budget_left(p) < (1 if reviewing else 2):
            state.stop_reason = "budget"
            break
        state.raw += 1
        try:
            (review_step if reviewing else search_step)(ctx, state)
        except BudgetExhausted as exc:
            log.warning("sub-question %d: %s", state.index, exc)
            state.stop_reason = "llm_budget"
            state.flags.add("llm_budget_exhausted")
        except ProviderError as exc:  # degraded: what was found so far still counts
            log.error("sub-question %d: %s", state.index, exc)
            state.stop_reason = "provider_error"
            state.flags.add("provider_error")
    if state.pending:  # stopped with hits unreviewed: keep them held
        for hit in state.pending:
            apply_verdict(state, hit, Verdict(
                chunk_id=hit.chunk_id, doc_id=hit.doc_id, decision="hold",
                rationale="loop ended before review", sub_question=state.index,
                step=state.raw, by="auto"))
        state.pending = []
    _record(state, "terminated", False, None, feedback=f"stopped: {state.stop_reason}")
    return state
