"""The one way a stage function becomes a Prefect task."""
from __future__ import annotations

from collections.abc import Callable

from prefect import task
from prefect.cache_policies import NONE

# Storage reads (S3 through pyarrow raises OSError) fail for reasons a retry can cure: a
# dropped connection, a throttled request, an endpoint restarting. Parser refusals and bugs
# are not exceptions of a task (they come back as quarantine reasons), so they are not retried.
STORAGE_RETRIES = 2
STORAGE_RETRY_DELAYS_S = [2, 10]


def storage_error(task, task_run, state) -> bool:  # Prefect's retry_condition_fn signature
    error = state.data if isinstance(state.data, BaseException) else None
    return isinstance(error, OSError)


def as_task(fn: Callable, name: str, *, reads_storage: bool = False):
    """Thin Prefect wrapper: our caches do the resuming, so Prefect caches nothing.

    `reads_storage`: the task reads the warehouse or the inputs, and is safe to run again
    (what it writes is content-addressed or replaced whole), so a storage error retries it.
    """
    retries = dict(retries=STORAGE_RETRIES, retry_delay_seconds=STORAGE_RETRY_DELAYS_S,
                   retry_condition_fn=storage_error) if reads_storage else {}
    return task(fn, name=name, cache_policy=NONE, persist_result=False, **retries)


def lost_worker(error: BaseException) -> bool:
    """Whether a task failed because the Dask worker running it died, every time it was tried.

    Dask runs a task whose worker died again elsewhere, up to `allowed_failures` times, then
    reports KilledWorker: the input is what kills them (a parser crash), not the machine.
    """
    try:
        from distributed import KilledWorker
    except ImportError:  # pragma: no cover - distributed is a dependency
        return False
    return isinstance(error, KilledWorker)
