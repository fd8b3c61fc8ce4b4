"""Seconds per stage of a flow run: each stage call is timed, the run reports them all."""
from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_CLOCK: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("stage_clock", default=None)


class StageClock:
    """`with StageClock() as clock:` — every `timed` stage called inside adds its seconds."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __enter__(self) -> "StageClock":
        self._token = _CLOCK.set(self.seconds)
        return self

    def __exit__(self, *exc) -> None:
        _CLOCK.reset(self._token)


def timed(name: str, stage: Callable[..., T]) -> Callable[..., T]:
    """The stage, timed into the flow run's StageClock (wall seconds; a stage run twice adds up)."""
    def run(*args, **kwargs) -> T:
        start = time.perf_counter()
        try:
            return stage(*args, **kwargs)
        finally:
            seconds = _CLOCK.get()
            if seconds is not None:
                seconds[name] = round(seconds.get(name, 0.0) + time.perf_counter() - start, 3)
    run.__name__ = run.__qualname__ = name
    return run
