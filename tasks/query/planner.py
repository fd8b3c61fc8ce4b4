"""Planner: one call splits the question into at most M sub-questions, each aimed at one
sub-corpus, entities in their original surface form."""
from __future__ import annotations

import logging
from typing import Literal

from schemas.query import (LlmCallRecord, PlanContext, PlannedSubQuestion,
                           PlanOutput, SubQuestion)
from tasks.query import prompts
from tasks.query.calls import recorded_call

log = logging.getLogger(__name__)


def sub_questions_from(items: list[PlannedSubQuestion], corpora: list[str], cap: int,
                       origin: Literal["planner", "replanner"] = "planner") -> list[SubQuestion]:
    """Model output → sub-questions: an unknown corpus becomes "all", the cap is enforced."""
    out = []
    for item in items[:cap]:
        target = item.target_corpus
        out.append(SubQuestion(text=item.text,
                               target_corpus=target if target in corpora else None,
                               entities=[e for e in item.entities if e.strip()],
                               dates=list(item.dates), origin=origin))
    return out


def plan(ctx) -> tuple[list[SubQuestion], LlmCallRecord, list[str]]:
    """(sub-questions, the call's record, flags). A failed plan falls back to the question."""
    cap = ctx.params.max_sub_questions
    context = PlanContext(question=ctx.question, corpora=ctx.corpora, max_sub_questions=cap)
    messages = prompts.plan_messages(context)
    value, record = recorded_call(ctx, "plan", messages, context)
    if value is None:
        log.warning("plan failed (%s); searching the question as one sub-question", record.error)
        return [SubQuestion(text=ctx.question)], record, ["plan_fallback"]
    out: PlanOutput = value
    flags = ["plan_truncated"] if len(out.sub_questions) > cap else []
    return sub_questions_from(out.sub_questions, ctx.corpora, cap), record, flags
