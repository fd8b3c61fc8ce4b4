"""Briefing: the only channel from one sub-question to the next (summary, confirmed facts,
dates, entities, gaps, search hints)."""
from __future__ import annotations

from schemas.query import BriefedDocument, Briefing, BriefingContext, LlmCallRecord
from schemas.retrieval import Hit
from tasks.query import prompts
from tasks.query.agent import AgentState, hit_views
from tasks.query.calls import recorded_call

MAX_ACCEPTED = 5  # passages shown to the briefing call


def accepted_passages(ctx, state: AgentState) -> list[Hit]:
    firsts = [pairs[0] for pairs in list(state.accepted.values())[:MAX_ACCEPTED]]
    views = hit_views(ctx, [hit for hit, _ in firsts])
    return [v.model_copy(update={"rationale": verdict.rationale})
            for v, (_, verdict) in zip(views, firsts)]


def brief(ctx, state: AgentState) -> tuple[Briefing, LlmCallRecord]:
    accepted = accepted_passages(ctx, state)
    context = BriefingContext(question=ctx.question, sub_question=state.sub_question,
                              accepted=accepted, memory=state.memory)
    messages = prompts.briefing_messages(context, ctx.params.snippet_chars)
    value, record = recorded_call(ctx, "briefing", messages, context, state.index)
    documents = [BriefedDocument(doc_id=a.doc_id, corpus=a.corpus, date=a.date) for a in accepted]
    if value is None:
        return Briefing.failed(record.error or "", documents), record
    return Briefing(**value.model_dump(), documents=documents), record
