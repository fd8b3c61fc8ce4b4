"""Held re-evaluation: once a sub-question's search is over, one call looks at its held
passages again with everything it now knows; promoted ones are accepted."""
from __future__ import annotations

from schemas.query import HeldContext, HeldReview, LlmCallRecord, Verdict
from tasks.query import prompts
from tasks.query.agent import AgentState, apply_verdict, hit_views, step_context
from tasks.query.calls import recorded_call

MAX_HELD = 12  # passages per re-evaluation call; the rest stay held


def reevaluate_held(ctx, state: AgentState) -> LlmCallRecord | None:
    pool = [(h, v) for h, v in state.held.values() if h.doc_id not in state.accepted][:MAX_HELD]
    if not pool:
        return None
    context = HeldContext(**dict(step_context(ctx, state)),
                          held=hit_views(ctx, [h for h, _ in pool]))
    messages = prompts.held_messages(context, ctx.params.snippet_chars)
    value, record = recorded_call(ctx, "held_review", messages, context, state.index)
    if value is None:
        return record
    out: HeldReview = value
    by_id = {h.chunk_id: h for h, _ in pool}
    for item in out.decisions:
        hit = by_id.get(item.chunk_id)
        if hit is None:
            ctx.flags.add("unknown_chunk_in_output")  # never shown: changes nothing
            continue
        if item.decision == "keep" or hit.doc_id in state.accepted:
            continue
        decision = "accept" if item.decision == "promote" else "reject"
        apply_verdict(state, hit, Verdict(
            chunk_id=hit.chunk_id, doc_id=hit.doc_id, decision=decision,
            rationale=item.rationale, sub_question=state.index, step=state.raw,
            by="held_review", probability=item.confidence))
    return record
