"""The routing record: which generation serves. One JSON file, always replaced atomically."""
from __future__ import annotations

from datetime import datetime, timezone

from schemas.generation import RoutingEvent, RoutingRecord
from tasks.store.atomic import atomic_write_text
from tasks.store.layout import StoreLayout


def read_routing(layout: StoreLayout) -> RoutingRecord:
    if not layout.routing.exists():
        return RoutingRecord()
    return RoutingRecord.model_validate_json(layout.routing.read_text("utf-8"))


def switch_routing(
    layout: StoreLayout,
    to_generation: str,
    space_id: str,
    action: str,
    actor: str,
    reason: str = "",
) -> RoutingRecord:
    """Point serving at `to_generation`; the caller holds the release lock.

    The new record is written beside the old one and renamed over it, so a reader sees the
    old record or the new one, never a torn one, and a crash before the rename changes nothing.
    """
    current = read_routing(layout)
    event = RoutingEvent(
        at=datetime.now(timezone.utc), actor=actor, action=action,  # type: ignore[arg-type]
        from_generation=current.serving, to_generation=to_generation, reason=reason,
    )
    updated = current.model_copy(update={
        "serving": to_generation, "space_id": space_id,
        "history": [*current.history, event],
        "retired": [g for g in current.retired if g != to_generation],
    })
    atomic_write_text(layout.routing, updated.model_dump_json(indent=2))
    return updated


def update_routing(layout: StoreLayout, retired: list[str] | None = None,
                   pinned: list[str] | None = None) -> RoutingRecord:
    """Change the retired/pinned lists without switching; the caller holds the release lock."""
    current = read_routing(layout)
    changes = {}
    if retired is not None:
        changes["retired"] = sorted(set(retired))
    if pinned is not None:
        changes["pinned"] = sorted(set(pinned))
    updated = current.model_copy(update=changes)
    atomic_write_text(layout.routing, updated.model_dump_json(indent=2))
    return updated
