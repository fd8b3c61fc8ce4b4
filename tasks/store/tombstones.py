"""The tombstone list: deleted documents, applied to every generation at query time."""
from __future__ import annotations

from datetime import datetime, timezone

from schemas.generation import Tombstone, TombstoneList
from tasks.store.atomic import atomic_write_text
from tasks.store.layout import StoreLayout


def tombstones_path(layout: StoreLayout):
    return layout.manifests / "tombstones.json"


def read_tombstones(layout: StoreLayout) -> TombstoneList:
    path = tombstones_path(layout)
    if not path.exists():
        return TombstoneList()
    return TombstoneList.model_validate_json(path.read_text("utf-8"))


def add_tombstones(layout: StoreLayout, doc_ids: list[str], actor: str, reason: str) -> TombstoneList:
    """Caller holds the release lock; the write is atomic, so readers see all or nothing."""
    current = read_tombstones(layout)
    known = current.doc_ids
    now = datetime.now(timezone.utc)
    added = [Tombstone(doc_id=d, at=now, actor=actor, reason=reason) for d in dict.fromkeys(doc_ids)
             if d not in known]
    updated = TombstoneList(tombstones=[*current.tombstones, *added])
    atomic_write_text(tombstones_path(layout), updated.model_dump_json(indent=2))
    return updated


def mark_purged(layout: StoreLayout, doc_ids: set[str]) -> None:
    current = read_tombstones(layout)
    now = datetime.now(timezone.utc)
    for t in current.tombstones:
        if t.doc_id in doc_ids and t.purged_at is None:
            t.purged_at = now
    atomic_write_text(tombstones_path(layout), current.model_dump_json(indent=2))
