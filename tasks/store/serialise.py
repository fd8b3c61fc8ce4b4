"""Publish, promote, roll back, delete and gc run one at a time, per home: the release slot.

The slot is one OS file lock (flock) on the home's manifests folder, and nothing else. The
kernel releases it the moment its holder's process ends, however it ends: a SIGKILLed ingest,
an OOM kill, a crashed machine (on reboot) leave nothing to expire, and the next command takes
the slot at once. Every process that writes this home's state shares the manifests folder, so
the lock reaches them all: CLI commands, the runs of `mabillon serve`'s deployments, workers
of a work pool on the same volume.

There used to be a second guard, a Prefect global concurrency limit with a lease. Its lease
lived in the memory of the Prefect server the holder talked to: a CLI command's temporary
server died with a killed command, and the slot stayed taken for good (issue 32). The lock
alone is the authority now; a slot is never held in a server and no pause holds it.

Whoever holds the slot writes who it is beside the lock (`.release.holder.json`); a command
that has to wait says so, naming the holder, instead of hanging silently. The record is only
words: a record left by a killed holder is overwritten by the next one and never blocks.
"""
from __future__ import annotations

import contextlib
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
WAIT_NOTICE_S = 2.0  # say who holds the slot once waiting has lasted this long


def holder_path(layout: StoreLayout):
    return layout.manifests / ".release.holder.json"


def current_run() -> dict:
    """What identifies this process's work: the command line, and the flow run if any."""
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:200],
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if "prefect" in sys.modules:  # never imported for this: a plain command stays light
        from prefect.context import FlowRunContext

        ctx = FlowRunContext.get()
        if ctx and ctx.flow_run:
            info["flow_run"] = ctx.flow_run.name
            info["flow_run_id"] = str(ctx.flow_run.id)
    return info


def read_holder(layout: StoreLayout) -> dict | None:
    try:
        return json.loads(holder_path(layout).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def holder_alive(holder: dict) -> bool | None:
    """Whether the recorded holder's process still runs (None: on another host, unknown)."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return None
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def holder_words(holder: dict | None) -> str:
    if not holder:
        return "another release, promotion or deletion"
    run = f" (flow run {holder['flow_run']!r})" if holder.get("flow_run") else ""
    # A dead recorded holder while the lock is taken: the record is stale and the live holder
    # has not written its own yet (a moment), so the words must not blame the dead one.
    gone = " (no longer running; another process has just taken the slot)" \
        if holder_alive(holder) is False else ""
    return (f"`{holder.get('command', '?')}`{run}, pid {holder.get('pid')} on {holder.get('host')}, "
            f"since {holder.get('since', '?')}{gone}")


@contextlib.contextmanager
def _noticed_wait(layout: StoreLayout, what: str) -> Iterator[None]:
    """Log, once, who holds the slot if acquiring takes longer than WAIT_NOTICE_S."""
    import threading

    done = threading.Event()

    def notice():
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
    """Hold this home's release slot; `timeout_s` 0 tries once (LockTimeout when it is taken)."""
    started = time.monotonic()
    with _noticed_wait(layout, "the release slot"):
        try:
            held = contextlib.ExitStack()
            held.enter_context(release_lock(layout.lock, timeout_s=timeout_s))
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
