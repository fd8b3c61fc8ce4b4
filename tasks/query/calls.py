"""One recorded provider call outside the agent's steps (plan, held review, briefing, replan,
rerank): validated output or None, and the record either way."""
from __future__ import annotations

from typing import Any

from schemas.query import LlmCallRecord, OUTPUT_SCHEMAS
from tasks.llm.base import InvalidOutput, LlmRequest, LlmResult, call_validated


def recorded_call(ctx, purpose: str, messages: list[dict[str, str]], context: dict[str, Any],
                  sub_question: int | None = None) -> tuple[dict[str, Any] | None, LlmCallRecord]:
    """`ctx` is the question's QuestionContext. An invalid output after the re-asks yields None
    (the caller falls back and flags it); budget and provider errors propagate."""
    request = LlmRequest(purpose, messages, OUTPUT_SCHEMAS[purpose], context)
    try:
        result: LlmResult = call_validated(ctx.provider, request, ctx.ledger, ctx.params.max_retries)
    except InvalidOutput as exc:
        result = exc.result
    return result.value, LlmCallRecord(
        purpose=purpose, sub_question=sub_question, prompt_digest=result.prompt_digest,
        raw_output=result.raw, raw_attempts=result.raws, output=result.value, error=result.error,
        model_s=result.model_s, tokens_in=result.tokens_in, tokens_out=result.tokens_out,
        attempts=result.attempts)
