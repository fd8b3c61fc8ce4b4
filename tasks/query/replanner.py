"""Replanner: after each briefing, one call may revise or add the sub-questions still to run;
the total never exceeds the planner's cap M."""
from __future__ import annotations

from schemas.query import (Briefing, DoneSubQuestion, LlmCallRecord,
                           ReplanContext, ReplanOutput, SubQuestion)
from tasks.query import prompts
from tasks.query.calls import recorded_call
from tasks.query.planner import sub_questions_from


def replan(ctx, done: list[tuple[SubQuestion, int]], remaining: list[SubQuestion],
           briefings: list[Briefing]) -> tuple[list[SubQuestion], LlmCallRecord, bool]:
    """(sub-questions to run next, the call's record, whether the cap cut the answer)."""
    cap = ctx.params.max_sub_questions
    context = ReplanContext(
        question=ctx.question,
        done=[DoneSubQuestion(**sq.model_dump(), accepted=n) for sq, n in done],
        remaining=list(remaining), briefings=list(briefings), max_sub_questions=cap,
        corpora=ctx.corpora)
    messages = prompts.replan_messages(context)
    value, record = recorded_call(ctx, "replan", messages, context)
    if value is None:
        return remaining, record, False
    out: ReplanOutput = value
    room = max(0, cap - len(done))
    revised = sub_questions_from(out.sub_questions, ctx.corpora, room, origin="replanner")
    # keep the origin of sub-questions the replanner left untouched
    for sq in revised:
        if any(sq.model_dump(exclude={"origin"}) == r.model_dump(exclude={"origin"})
               for r in remaining):
            sq.origin = "planner"
    return revised, record, len(out.sub_questions) > room
