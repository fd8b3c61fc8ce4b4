"""`replay`: recorded responses, for deterministic tests and for re-running a query record.

Responses are queued per purpose and served in order. A queued item is the raw text, an
object (serialised), or — for tests that must name ids only known at run time — a function
of the request returning either. A purpose with no script left falls
back to `fallback` when one is given (e.g. `rules` for the calls a test does not script);
otherwise the run fails loudly rather than inventing an answer.
"""
from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any, Callable

from tasks.llm.base import Completion, LlmRequest, Provider


class ReplayExhausted(RuntimeError):
    """A call was made for which no response was recorded."""


Item = str | dict[str, Any] | Callable[[LlmRequest], "str | dict[str, Any]"]


class ReplayProvider:
    name = "replay"

    def __init__(self, script: dict[str, list[Item]],
                 fallback: Provider | None = None, model: str | None = "replay"):
        self.model = model
        self.fallback = fallback
        self.queues = {purpose: deque(items) for purpose, items in script.items()}
        self.served: list[tuple[str, str]] = []  # (purpose, "script"|"fallback") in call order

    def complete(self, request: LlmRequest) -> Completion:
        queue = self.queues.get(request.purpose)
        if queue:
            item = queue.popleft()
            self.served.append((request.purpose, "script"))
            if callable(item):
                item = item(request)
            text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
            return Completion(text=text)
        if self.fallback is not None:
            self.served.append((request.purpose, "fallback"))
            return self.fallback.complete(request)
        raise ReplayExhausted(f"no recorded response left for a {request.purpose!r} call")

    def remaining(self) -> dict[str, int]:
        return {p: len(q) for p, q in self.queues.items() if q}

    @classmethod
    def from_record(cls, path: Path, fallback: Provider | None = None) -> "ReplayProvider":
        """Replay the raw outputs a query record kept, in the order they were produced."""
        record = json.loads(Path(path).read_text("utf-8"))
        script: dict[str, list[str]] = {}
        for call in record.get("plan_calls", []):
            script.setdefault("plan", []).extend(call.get("raw_attempts") or [call["raw_output"]])
        for step in record.get("steps", []):
            if step.get("purpose"):
                script.setdefault(step["purpose"], []).extend(
                    step.get("raw_attempts") or [step["raw_output"]])
        for call in record.get("calls", []):
            script.setdefault(call["purpose"], []).extend(
                call.get("raw_attempts") or [call["raw_output"]])
        return cls(script, fallback=fallback, model=record.get("model"))
