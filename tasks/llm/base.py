"""The provider interface and the one validated-call path every provider goes through.

A provider only turns messages into text (`complete`); `call_validated` parses that text as
JSON, validates it with the purpose's output model (whose JSON Schema the request carries),
feeds the validation error back for a bounded number of re-asks, and charges the
per-question ledger. What comes back is an instance of the output model, never a dict.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, Field, ValidationError

from schemas.query import PURPOSES, output_schema

log = logging.getLogger(__name__)

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}
T = TypeVar("T", bound=BaseModel)  # the output model of a call


@dataclass(frozen=True)
class LlmRequest(Generic[T]):
    purpose: str  # plan | search | review | held_review | briefing | replan | rerank
    messages: list[Message]
    # The typed state the messages were rendered from (schemas.query.PURPOSES[purpose].context).
    # Model providers ignore it; the offline policies decide from it instead of re-parsing
    # the prompt.
    context: BaseModel | None = None
    # The output model; by default the purpose's (schemas.query.PURPOSES).
    output: type[T] | None = None

    @property
    def output_model(self) -> type[T]:
        if self.output is not None:
            return self.output
        if self.purpose not in PURPOSES:
            raise ValueError(f"no output model for purpose {self.purpose!r}")
        return PURPOSES[self.purpose].output

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON Schema sent to the model, derived from the output model."""
        return output_schema(self.output_model)


@dataclass(frozen=True)
class Completion:
    text: str
    tokens_in: int = 0
    tokens_out: int = 0


class Provider(Protocol):
    name: str
    model: str | None

    def complete(self, request: LlmRequest) -> Completion: ...


class BudgetExhausted(RuntimeError):
    """The question's budget of calls or tokens is spent; the loop stops and flags it."""


class ProviderError(RuntimeError):
    """The model endpoint failed (after its own retries); the loop degrades and flags it."""


class InvalidOutput(ValueError):
    """The model did not produce a valid object within the allowed re-asks."""

    def __init__(self, message: str, result: "LlmResult"):
        super().__init__(message)
        self.result = result


@dataclass
class Ledger:
    """Per-question accounting and budget; shared by every call for one question."""

    max_calls: int = 10_000
    max_tokens: int = 10_000_000
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    model_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check(self) -> None:
        if self.calls >= self.max_calls:
            raise BudgetExhausted(f"call budget spent ({self.calls}/{self.max_calls})")
        if self.tokens_in + self.tokens_out >= self.max_tokens:
            raise BudgetExhausted(
                f"token budget spent ({self.tokens_in + self.tokens_out}/{self.max_tokens})")

    def charge(self, completion: Completion, seconds: float) -> None:
        with self._lock:
            self.calls += 1
            self.tokens_in += completion.tokens_in
            self.tokens_out += completion.tokens_out
            self.model_s += seconds


class LlmResult(BaseModel, Generic[T]):
    """One logical call: the validated output (an instance of the request's output model; None
    when no attempt was valid), what the model wrote, and what it cost."""

    value: T | None
    raw: str
    prompt_digest: str
    attempts: int
    tokens_in: int = 0
    tokens_out: int = 0
    model_s: float = 0.0
    error: str | None = None
    raws: list[str] = Field(default_factory=list)  # every attempt's raw output, in order


def prompt_digest(messages: list[Message]) -> str:
    blob = json.dumps(messages, ensure_ascii=False, sort_keys=True).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text`; small models wrap JSON in fences or chatter."""
    stripped = _FENCE.sub("", text.strip())
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        found = _objects_in(stripped)
        if not found:
            raise ValueError("no JSON object in the output") from None
        if len(found) > 1:
            # e.g. a passage's fake action quoted before the answer: which one is meant is a
            # guess, and guessing the first would let a document's text pick the action
            raise ValueError(f"{len(found)} JSON objects in the output; answer with exactly one") from None
        value = found[0]
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _objects_in(text: str) -> list[dict[str, Any]]:
    """The top-level JSON objects embedded in prose, in order."""
    decoder, found, at = json.JSONDecoder(), [], text.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(text, at)
        except (json.JSONDecodeError, RecursionError):
            at = text.find("{", at + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        at = text.find("{", end)
    return found


def describe(error: ValidationError) -> str:
    """The first validation error, as fed back to the model: where, and what was wrong."""
    first = error.errors()[0]
    where = "/".join(str(p) for p in first["loc"]) or "(root)"
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"at {where}: {first['msg']}{more}"


def validate_output(text: str, output: type[BaseModel]) -> tuple[BaseModel | None, str | None]:
    """(the output model, None) or (None, what was wrong with the text)."""
    try:
        value = parse_json_object(text)
    except ValueError as exc:
        return None, f"not valid JSON: {exc}"
    try:
        return output.model_validate(value), None
    except ValidationError as exc:
        return None, describe(exc)


def call_validated(provider: Provider, request: LlmRequest[T], ledger: Ledger,
                   max_retries: int = 2) -> LlmResult[T]:
    """One logical call: ask, validate, re-ask with the error, at most 1 + max_retries times."""
    messages = list(request.messages)
    digest = prompt_digest(messages)
    result = LlmResult[request.output_model](value=None, raw="", prompt_digest=digest, attempts=0)
    for attempt in range(1 + max_retries):
        ledger.check()
        started = time.perf_counter()
        try:
            completion = provider.complete(LlmRequest(request.purpose, messages, request.context,
                                                      request.output))
        except (BudgetExhausted, ProviderError):
            raise
        except Exception as exc:  # the provider is outside us: its failure degrades the answer
            log.exception("%s: provider %s failed", request.purpose, getattr(provider, "name", "?"))
            raise ProviderError(f"{getattr(provider, 'name', 'provider')} failed: "
                                f"{type(exc).__name__}: {exc}") from exc
        seconds = time.perf_counter() - started
        ledger.charge(completion, seconds)
        result.attempts = attempt + 1
        result.raw = completion.text
        result.raws.append(completion.text)
        result.tokens_in += completion.tokens_in
        result.tokens_out += completion.tokens_out
        result.model_s += seconds
        value, error = validate_output(completion.text, request.output_model)
        if error is None:
            result.value, result.error = value, None
            return result
        result.error = error
        log.info("%s output invalid (attempt %d): %s", request.purpose, attempt + 1, error)
        messages = [*messages, {"role": "assistant", "content": completion.text},
                    {"role": "user", "content": f"Your answer was invalid {error}. Reply again "
                                                "with one JSON object that matches the schema."}]
    raise InvalidOutput(f"{request.purpose}: {result.error}", result)
