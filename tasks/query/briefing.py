"""Briefing: the only channel from one sub-question to the next (summary, confirmed facts,
dates, entities, gaps, search hints)."""
from __future__ import annotations

from schemas.query import Briefing, LlmCallRecord, OUTPUT_SCHEMAS
from tasks.query import prompts
from tasks.query.agent import AgentState, hit_dict
from tasks.query.calls import recorded_call

MAX_ACCEPTED = 5  # passages shown to the briefing call


def accepted_passages(state: AgentState) -> list[dict]:
    out = []
    for hits in list(state.accepted.values())[:MAX_ACCEPTED]:
        hit, verdict = hits[0]
        out.append(hit_dict(hit) | {"rationale": verdict.rationale})
    return out


def brief(ctx, state: AgentState) -> tuple[Briefing, LlmCallRecord]:
    accepted = accepted_passages(state)
    messages = prompts.briefing_messages(ctx.question, state.sub_question, accepted, state.memory,
                                         ctx.params.snippet_chars, OUTPUT_SCHEMAS["briefing"])
    context = {"question": ctx.question, "sub_question": state.sub_question.model_dump(),
               "accepted": accepted, "memory": state.memory.model_dump()}
    value, record = recorded_call(ctx, "briefing", messages, context, state.index)
    documents = [{"doc_id": a["doc_id"], "corpus": a["corpus"], "date": a["date"]}
                 for a in accepted]
    if value is None:
        return Briefing(summary="briefing failed", gaps=[record.error or ""],
                        documents=documents), record
    return Briefing(**value, documents=documents), record
