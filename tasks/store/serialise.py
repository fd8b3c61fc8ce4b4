"""Publish, promote, roll back, delete and gc run one at a time.

Two guards, because either alone has a gap: a Prefect global concurrency limit (visible in the
UI, honoured by every deployment run against the same Prefect API) and the release file lock
(honoured by every process on this state root, with or without Prefect, and released by the
OS if the holder dies).
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from tasks.store.atomic import release_lock
from tasks.store.layout import StoreLayout

log = logging.getLogger(__name__)
RELEASE_LIMIT = "mabillon-release"


def ensure_release_limit() -> bool:
    """Create the one-slot limit on the Prefect API if missing; False when no API is reachable."""
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            client.upsert_global_concurrency_limit_by_name(RELEASE_LIMIT, 1)
        return True
    except Exception as exc:  # no Prefect API: the file lock alone serialises
        log.debug("no Prefect concurrency limit: %s", exc)
        return False


@contextlib.contextmanager
def serialised_release(layout: StoreLayout, timeout_s: float = 3600) -> Iterator[None]:
    slot = contextlib.nullcontext()
    if ensure_release_limit():
        from prefect.concurrency.sync import concurrency

        slot = concurrency(RELEASE_LIMIT, occupy=1, timeout_seconds=timeout_s, strict=False)
    with slot, release_lock(layout.lock, timeout_s=timeout_s):
        yield
