"""The tombstone list: deleted documents, applied to every generation at query time.

Every change is a read-modify-write of one file under the list's own lock (`.tombstones.lock`),
never behind the release slot: a deletion masks at once, even while a release runs for an
hour. The lock is held for one small read and one atomic write, so its wait is bounded by
those, and readers never take it (each write replaces the file whole).
"""
from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from datetime import datetime, timezone

from schemas.generation import Tombstone, TombstoneList
from tasks.store.atomic import atomic_write_text, file_lock
from tasks.store.layout import StoreLayout

LOCK_TIMEOUT_S = 30.0  # a holder does one read and one write; more means a stuck file system


def tombstones_path(layout: StoreLayout):
    return layout.manifests / "tombstones.json"


def read_tombstones(layout: StoreLayout) -> TombstoneList:
    path = tombstones_path(layout)
    if not path.exists():
        return TombstoneList()
    return TombstoneList.model_validate_json(path.read_text("utf-8"))


@contextlib.contextmanager
def _changing(layout: StoreLayout) -> Iterator[TombstoneList]:
    """The current list, to change in place; written back atomically, under the list's lock."""
    with file_lock(layout.manifests / ".tombstones.lock", LOCK_TIMEOUT_S,
                   f"the tombstone list of {layout.manifests} stayed locked for {LOCK_TIMEOUT_S:.0f} s "
                   "(a stuck file system?); nothing was changed"):
        current = read_tombstones(layout)
        yield current
        atomic_write_text(tombstones_path(layout), current.model_dump_json(indent=2))


def add_tombstones(layout: StoreLayout, doc_ids: list[str], actor: str, reason: str) -> TombstoneList:
    """Mask now: the new tombstones are pending until a generation without them serves."""
    with _changing(layout) as current:
        known = current.doc_ids
        now = datetime.now(timezone.utc)
        current.tombstones += [Tombstone(doc_id=d, at=now, actor=actor, reason=reason, pending=True)
                               for d in dict.fromkeys(doc_ids) if d not in known]
    return current


def mark_purged(layout: StoreLayout, doc_ids: set[str]) -> None:
    now = datetime.now(timezone.utc)
    with _changing(layout) as current:
        for t in current.tombstones:
            if t.doc_id in doc_ids and t.purged_at is None:
                t.purged_at = now


def mark_settled(layout: StoreLayout, doc_ids: Collection[str]) -> None:
    """What follows these deletions is done (the caller holds the release slot)."""
    with _changing(layout) as current:
        for t in current.tombstones:
            if t.doc_id in doc_ids:
                t.pending = False
