"""Replanner: after each briefing, one call may revise or add the sub-questions still to run;
the total never exceeds the planner's cap M."""
from __future__ import annotations

from schemas.query import Briefing, LlmCallRecord, OUTPUT_SCHEMAS, SubQuestion
from tasks.query import prompts
from tasks.query.calls import recorded_call
from tasks.query.planner import sub_questions_from


def replan(ctx, done: list[tuple[SubQuestion, int]], remaining: list[SubQuestion],
           briefings: list[Briefing]) -> tuple[list[SubQuestion], LlmCallRecord, bool]:
    """(sub-questions to run next, the call's record, whether the cap cut the answer)."""
    cap = ctx.params.max_sub_questions
    done_d = [sq.model_dump() | {"accepted": n} for sq, n in done]
    remaining_d = [sq.model_dump() for sq in remaining]
    messages = prompts.replan_messages(ctx.question, done_d, remaining_d, briefings, cap,
                                       OUTPUT_SCHEMAS["replan"])
    context = {"question": ctx.question, "done": done_d, "remaining": remaining_d,
               "briefings": [b.model_dump() for b in briefings], "max_sub_questions": cap,
               "corpora": ctx.corpora}
    value, record = recorded_call(ctx, "replan", messages, context)
    if value is None:
        return remaining, record, False
    room = max(0, cap - len(done))
    proposed = value["sub_questions"]
    revised = sub_questions_from(proposed, ctx.corpora, room, origin="replanner")
    # keep the origin of sub-questions the replanner left untouched
    for sq in revised:
        if any(sq.model_dump(exclude={"origin"}) == r.model_dump(exclude={"origin"})
               for r in remaining):
            sq.origin = "planner"
    return revised, record, len(proposed) > room
