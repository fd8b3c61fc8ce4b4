"""What follows a deletion's mask: a generation without the documents, and their purge.

`delete` writes its tombstones at once under the list's own lock (the mask), then settles them
here: the serving generation is published again without them and, with no retention window,
every copy is purged. That needs the release slot, and `delete` never waits for it: when a
release (or any holder) has it, `delete` returns with the mask in force, and the holder
settles the deletion as it ends. So both sides only *try* the slot, after their own step:

- `delete`, after writing its tombstones;
- every holder of the slot (release, promote, rollback, canary, gc), after letting it go.

A deletion masked while the slot was held is seen by its holder's try, which comes after; a
holder that finds the slot taken again leaves the work to the new holder, which tries in turn.
No deletion is left pending while some process that writes this home is running, and none
waits behind a running release. A pending tombstone is safe meanwhile: the mask applies to
every generation at query time, and a release's stage step drops tombstoned documents.
"""
from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

from pydantic import BaseModel

from flows.release_records import record_routing_change
from schemas.settings import MabillonSettings
from tasks.ops.deletion import publish_without
from tasks.ops.retention import PurgeReport, purge_documents
from tasks.store.atomic import LockTimeout
from tasks.store.layout import StoreLayout
from tasks.store.routing import read_routing
from tasks.store.serialise import holder_words, read_holder, serialised_release
from tasks.store.tombstones import mark_settled, read_tombstones

log = logging.getLogger(__name__)


class Settlement(BaseModel):
    doc_ids: list[str]  # settled by this call
    unknown: list[str]  # of those, not in the serving generation (nothing to publish for them)
    generation: str | None  # serving afterwards
    published_at: float | None = None  # time.perf_counter() when a generation without them served
    purge: PurgeReport | None = None
    purged_at: float | None = None
    behind: str | None = None  # who held the slot when this call gave up (they settle the rest)


def settle_deletions(layout: StoreLayout, settings: MabillonSettings) -> Settlement | None:
    """Settle every pending deletion if the release slot is free now; never waits for it.

    None when nothing was pending. Call it outside the slot: after writing tombstones, or after
    letting the slot go."""
    settled: Settlement | None = None
    while read_tombstones(layout).pending:
        try:
            with serialised_release(layout, timeout_s=0):
                settled = _settle(layout, settings, settled)
        except LockTimeout:
            behind = holder_words(read_holder(layout))
            log.info("deletions masked; the release slot is held by %s, which settles them as it ends",
                     behind)
            return (settled or Settlement(doc_ids=[], unknown=[], generation=read_routing(layout).serving)
                    ).model_copy(update={"behind": behind})
    return settled


def settle_quietly(layout: StoreLayout, settings: MabillonSettings) -> None:
    """For a holder whose own work is done (a release, a promotion): a failure here is logged,
    and the deletion, masked already, stays pending for the next holder, who tries again."""
    try:
        settle_deletions(layout, settings)
    except Exception as exc:  # the caller's own result stands; the mask holds regardless
        log.error("the deletions pending in %s stay masked, but their new generation failed (%s); "
                  "the next release, delete or gc tries again", layout.manifests.parent, exc)


@contextlib.contextmanager
def holding_release_slot(layout: StoreLayout, settings: MabillonSettings) -> Iterator[None]:
    """The release slot, for a holder that lets go with deletions masked meanwhile settled,
    whether its own work succeeded or failed."""
    try:
        with serialised_release(layout):
            yield
    except Exception:
        settle_quietly(layout, settings)
        raise
    settle_quietly(layout, settings)


def _settle(layout: StoreLayout, settings: MabillonSettings, before: Settlement | None) -> Settlement:
    """Under the slot: publish without the pending documents, purge them without a window."""
    pending = read_tombstones(layout).pending  # again: it may have grown, or been settled, since
    if not pending:
        return before or Settlement(doc_ids=[], unknown=[], generation=read_routing(layout).serving)
    doc_ids = [t.doc_id for t in pending]
    actor = ", ".join(dict.fromkeys(t.actor for t in pending))
    reason = "; ".join(dict.fromkeys(t.reason for t in pending if t.reason))
    generation, unknown = publish_without(layout, settings.model_copy(update={"actor": actor}),
                                          doc_ids, reason)
    published_at = None
    if len(unknown) < len(doc_ids):  # a new generation serves: it gets its release record
        record_routing_change(layout, generation, actor, f"delete: {reason}".strip(), via="delete")
        published_at = time.perf_counter()
    purge, purged_at = None, None
    if settings.retention.deletion_window_s <= 0:  # otherwise `mabillon gc` purges once it passed
        purge = purge_documents(layout, set(doc_ids))
        purged_at = time.perf_counter()
    mark_settled(layout, doc_ids)
    if before is not None:  # a second round: tombstones that arrived while the first ran
        doc_ids, unknown = [*before.doc_ids, *doc_ids], [*before.unknown, *unknown]
        published_at = published_at or before.published_at
    return Settlement(doc_ids=doc_ids, unknown=unknown, generation=generation,
                      published_at=published_at, purge=purge or (before.purge if before else None),
                      purged_at=purged_at)
