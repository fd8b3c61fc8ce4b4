"""The one way a stage function becomes a Prefect task."""
from __future__ import annotations

from collections.abc import Callable

from prefect import task
from prefect.cache_policies import NONE


def as_task(fn: Callable, name: str):
    """Thin Prefect wrapper: our staging caches do the resuming, so Prefect caches nothing."""
    return task(fn, name=name, cache_policy=NONE, persist_result=False)

