"""What a Dask worker readies as it starts (distributed's `preload`, named by the LocalCluster of
flows/runner.py; for a cluster started by hand: `dask worker ADDRESS --preload flows.dask_preload`).

A fresh worker's first parse task used to pay, inside the release's parse stage, for importing
Prefect's task engine and the parse and embed modules (≈ 1.1 s on a quiet core, tens of seconds on
a loaded one) and for starting its parser-sandbox child; the `local` runner's threads had all of
that from the flow's own process. Here the worker does it on a thread of its own as soon as it
starts, so it registers at once and the work overlaps the flow's acquire, inspect and plan
stages; a task that arrives sooner waits on the same imports (Python's import lock), never
repeats them. The embedding model is not loaded here: which model is the release's to say, and
loading torch during the parse stage would take a core from OCR.
"""
from __future__ import annotations

import hashlib
import importlib
import logging
import threading
from datetime import datetime, timezone

MODULES = ("prefect.task_engine", "tasks.ingest.parse.units", "tasks.ingest.sandbox", "tasks.ingest.embed")

log = logging.getLogger(__name__)


def ready() -> None:
    """Import what a parse task needs and start one parser-sandbox child (default limits)."""
    for name in MODULES:
        importlib.import_module(name)
    from schemas.lineage import Revision
    from schemas.settings import MabillonSettings
    from tasks.ingest.parse.errors import ParseRefused
    from tasks.ingest.sandbox import parse_untrusted

    data = b"Preload."
    revision = Revision(revision_id="r-preload", source_id="preload", doc_id="preload", uri="preload:",
                        corpus="preload", date=None, title=None, tenant="preload", groups=[],
                        digest=hashlib.sha256(data).hexdigest(), size=len(data), media_type="text/plain",
                        acquired_at=datetime.now(timezone.utc))
    try:  # the child stays in the worker's pool for the first task with the same limits
        parse_untrusted(data, revision, MabillonSettings().parsing)
    except ParseRefused as exc:
        log.warning("parser sandbox not started ahead: %s", exc)


def dask_setup(worker) -> None:  # noqa: ARG001 — distributed's preload hook
    threading.Thread(target=ready, name="mabillon-preload", daemon=True).start()
