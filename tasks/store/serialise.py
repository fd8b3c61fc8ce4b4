"""Publish, promote, roll back, delete and gc run one at a time, per home.

Two guards, because either alone has a gap: a Prefect global concurrency limit (visible in the
UI, honoured by every deployment run against the same Prefect API) and the release file lock
(honoured by every process on this state root, with or without Prefect, and released by the
OS if the holder dies).

Both belong to one home: the limit's name carries the home's identity (a digest of its
manifests folder), so two homes sharing a Prefect database never wait for each other. Whoever
holds the slot writes who it is beside the lock; a command that has to wait says so, naming the
holder, instead of hanging silently.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone

from tasks.store.atomic import LockTimeout, release_lock
from tasks.store.layout import StoreLayout

log = logging.getLogger(__name__)
RELEASE_LIMIT = "mabillon-release"  # the prefix; see release_limit_name
WAIT_NOTICE_S = 2.0  # say who holds the slot once waiting has lasted this long
# A live holder renews its lease every 3/4 of this; a killed one (SIGKILL, a lost machine) holds
# the slot only until it lapses, so the next operator waits about a minute, not Prefect's default
# five. The file lock, released by the OS at once, still keeps two writers apart meanwhile.
RELEASE_LEASE_S = 60.0


def home_identity(layout: StoreLayout) -> str:
    return hashlib.sha256(str(layout.manifests.resolve()).encode()).hexdigest()[:12]


def release_limit_name(layout: StoreLayout) -> str:
    return f"{RELEASE_LIMIT}-{home_identity(layout)}"


def holder_path(layout: StoreLayout):
    return layout.manifests / ".release.holder.json"


def current_run() -> dict:
    """What identifies this process's work: the command line, and the flow run if any."""
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:200],
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    try:
        from prefect.context import FlowRunContext

        ctx = FlowRunContext.get()
        if ctx and ctx.flow_run:
            info["flow_run"] = ctx.flow_run.name
            info["flow_run_id"] = str(ctx.flow_run.id)
    except Exception:  # no Prefect in this process
        pass
    return info


def read_holder(layout: StoreLayout) -> dict | None:
    try:
        return json.loads(holder_path(layout).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def holder_words(holder: dict | None) -> str:
    if not holder:
        return "another release, promotion or deletion"
    run = f" (flow run {holder['flow_run']!r})" if holder.get("flow_run") else ""
    return (f"`{holder.get('command', '?')}`{run}, pid {holder.get('pid')} on {holder.get('host')}, "
            f"since {holder.get('since', '?')}")


def ensure_release_limit(name: str) -> bool:
    """Create the one-slot limit on the Prefect API if missing; False when no API is reachable."""
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            client.upsert_global_concurrency_limit_by_name(name, 1)
        return True
    except Exception as exc:  # no Prefect API: the file lock alone serialises
        log.debug("no Prefect concurrency limit: %s", exc)
        return False


def _prefect_in_use() -> bool:
    """Only a process that already runs Prefect (a flow) takes the Prefect slot: a plain CLI
    command (pin) must not start a server for it."""
    if "prefect" not in sys.modules:
        return False
    from prefect.context import FlowRunContext

    return FlowRunContext.get() is not None


@contextlib.contextmanager
def _noticed_wait(layout: StoreLayout, what: str) -> Iterator[None]:
    """Log, once, who holds the slot if acquiring takes longer than WAIT_NOTICE_S."""
    import threading

    done = threading.Event()

    def notice():
        # a slow API alone is no reason to speak: only a slot someone holds is
        if not done.wait(WAIT_NOTICE_S) and (holder := read_holder(layout)) is not None:
            log.warning("waiting for %s of %s: held by %s", what, layout.manifests.parent,
                        holder_words(holder))

    watcher = threading.Thread(target=notice, name="release-wait-notice", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()


@contextlib.contextmanager
def serialised_release(layout: StoreLayout, timeout_s: float = 3600) -> Iterator[None]:
    name = release_limit_name(layout)
    slot = contextlib.nullcontext()
    if _prefect_in_use() and ensure_release_limit(name):
        from prefect.concurrency.sync import concurrency

        slot = concurrency(name, occupy=1, timeout_seconds=timeout_s, lease_duration=RELEASE_LEASE_S,
                           strict=False)
    started = time.monotonic()
    with _noticed_wait(layout, "the release slot"):
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(slot)
                stack.enter_context(release_lock(layout.lock, timeout_s=timeout_s))
                held = stack.pop_all()
        except LockTimeout:
            raise LockTimeout(f"{holder_words(read_holder(layout))} held the release slot of this "
                              f"home for over {time.monotonic() - started:.0f} s; retry when it "
                              "ends") from None
    with held:
        from tasks.store.atomic import atomic_write_text

        atomic_write_text(holder_path(layout), json.dumps(current_run()))
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                holder_path(layout).unlink()
