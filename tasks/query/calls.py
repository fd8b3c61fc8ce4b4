"""One recorded provider call outside the agent's steps (plan, held review, briefing, replan,
rerank): the validated output model or None, and the record either way."""
from __future__ import annotations

from pydantic import BaseModel

from schemas.query import LlmCallRecord
from tasks.llm.base import InvalidOutput, LlmRequest, LlmResult, call_validated


def recorded_call(ctx, purpose: str, messages: list[dict[str, str]], context: BaseModel,
                  sub_question: int | None = None) -> tuple[BaseModel | None, LlmCallRecord]:
    """`ctx` is the question's QuestionContext. An invalid output after the re-asks yields None
    (the caller falls back, and the question is flagged `invalid_output`); budget and
    provider errors propagate."""
    request = LlmRequest(purpose, messages, context)
    try:
        result: LlmResult = call_validated(ctx.provider, request, ctx.ledger, ctx.params.max_retries)
    except InvalidOutput as exc:
        result = exc.result
        ctx.flags.add("invalid_output")
    output = result.value.model_dump(mode="json") if result.value is not None else None
    return result.value, LlmCallRecord(
        purpose=purpose, sub_question=sub_question, prompt_digest=result.prompt_digest,
        raw_output=result.raw, raw_attempts=result.raws, output=output, error=result.error,
        model_s=result.model_s, tokens_in=result.tokens_in, tokens_out=result.tokens_out,
        attempts=result.attempts)
