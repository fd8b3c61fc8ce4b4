"""Seconds per stage of a flow run: each stage call is timed, the run reports them all."""
from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)
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


def stage_rows(seconds: dict[str, float]) -> list[dict]:
    """One row per stage in the order they ran, with its share of the run; a total last."""
    total = sum(seconds.values())
    rows = [{"stage": name, "seconds": round(s, 2), "share": f"{100 * s / total:.0f} %" if total else "-"}
            for name, s in seconds.items()]
    if not rows:
        return []
    return rows + [{"stage": "total", "seconds": round(total, 2), "share": "100 %" if total else "-"}]


def stage_markdown(seconds: dict[str, float]) -> list[str]:
    """The same rows as a markdown table (stage names are ours: no escaping needed)."""
    rows = stage_rows(seconds)
    if not rows:
        return []
    return ["| stage | seconds | share |", "|---|---:|---:|",
            *(f"| {r['stage']} | {r['seconds']:.2f} | {r['share']} |" for r in rows)]


def publish_stage_seconds(seconds: dict[str, float]) -> None:
    """The table artifact `stage-seconds` of this run."""
    if not seconds:
        return
    from prefect.artifacts import create_table_artifact

    try:
        create_table_artifact(key="stage-seconds", table=stage_rows(seconds),
                              description="wall seconds per stage of this release")
    except Exception as exc:  # a view failing must not fail the release it describes
        log.warning("stage timings not published: %s", exc)
