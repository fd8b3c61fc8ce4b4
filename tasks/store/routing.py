"""The routing record: which generation serves, the canaries, and the history of both.

One JSON file, always replaced whole by an atomic rename; every writer holds the release lock
(tasks.store.serialise), so a reader sees the old record or the new one, never a torn one, and
a crash before the rename changes nothing.
"""
from __future__ import annotations

from datetime import datetime, timezone

from schemas.generation import Canary, RoutingEvent, RoutingRecord
from tasks.store.atomic import atomic_write_text
from tasks.store.layout import StoreLayout

# Switches after which a canary no longer compares against what everyone else sees.
ENDS_CANARIES = ("promote", "rollback")


def read_routing(layout: StoreLayout) -> RoutingRecord:
    if not layout.routing.exists():
        return RoutingRecord()
    return RoutingRecord.model_validate_json(layout.routing.read_text("utf-8"))


def _write(layout: StoreLayout, record: RoutingRecord) -> RoutingRecord:
    atomic_write_text(layout.routing, record.model_dump_json(indent=2))
    return record


def _now() -> datetime:
    return datetime.now(timezone.utc)


def switch_routing(
    layout: StoreLayout,
    to_generation: str,
    space_id: str,
    action: str,
    actor: str,
    reason: str = "",
    flow_run_id: str | None = None,
) -> RoutingRecord:
    """Point serving at `to_generation`; the caller holds the release lock.

    Promotion and rollback end every canary in the same rename (each ending is in the history);
    a publish keeps them, except one whose candidate now serves everyone.
    """
    current = read_routing(layout)
    at = _now()
    ended = [c for c in current.canaries if action in ENDS_CANARIES or c.generation == to_generation]
    events = [RoutingEvent(at=at, actor=actor, action="canary-end", from_generation=current.serving,
                           to_generation=c.generation, groups=c.groups, flow_run_id=flow_run_id,
                           reason=f"ended by {action} of {to_generation}") for c in ended]
    events.append(RoutingEvent(
        at=at, actor=actor, action=action,  # type: ignore[arg-type]
        from_generation=current.serving, to_generation=to_generation, reason=reason,
        flow_run_id=flow_run_id))
    return _write(layout, current.model_copy(update={
        "serving": to_generation, "space_id": space_id,
        "history": [*current.history, *events],
        "retired": [g for g in current.retired if g != to_generation],
        "canaries": [c for c in current.canaries if c not in ended],
    }))


def start_canary(layout: StoreLayout, canary: Canary, flow_run_id: str | None = None) -> RoutingRecord:
    """Route `canary.groups` to its candidate (replacing that candidate's earlier canary); the
    caller holds the release lock and has checked the candidate and the groups."""
    current = read_routing(layout)
    event = RoutingEvent(at=canary.since, actor=canary.actor, action="canary",
                         from_generation=current.serving, to_generation=canary.generation,
                         reason=canary.reason, groups=canary.groups, flow_run_id=flow_run_id)
    kept = [c for c in current.canaries if c.generation != canary.generation]
    return _write(layout, current.model_copy(update={
        "canaries": [*kept, canary], "history": [*current.history, event]}))


def end_canaries(layout: StoreLayout, actor: str, reason: str = "",
                 generation: str | None = None) -> RoutingRecord:
    """End the canary of `generation` (or every canary); the caller holds the release lock."""
    current = read_routing(layout)
    ended = [c for c in current.canaries if generation is None or c.generation == generation]
    if not ended:
        return current
    at = _now()
    events = [RoutingEvent(at=at, actor=actor, action="canary-end", from_generation=current.serving,
                           to_generation=c.generation, groups=c.groups, reason=reason) for c in ended]
    return _write(layout, current.model_copy(update={
        "canaries": [c for c in current.canaries if c not in ended],
        "history": [*current.history, *events]}))


def record_event(layout: StoreLayout, action: str, generation: str, actor: str, reason: str = "",
                 retire: bool = False, flow_run_id: str | None = None) -> RoutingRecord:
    """Note an event about `generation` that does not switch serving (a rejection, a gate
    timeout); `retire` also lists it as retired and ends its canary. Caller holds the lock."""
    current = read_routing(layout)
    event = RoutingEvent(at=_now(), actor=actor, action=action,  # type: ignore[arg-type]
                         from_generation=current.serving, to_generation=generation, reason=reason,
                         flow_run_id=flow_run_id)
    changes: dict = {"history": [*current.history, event]}
    if retire:
        changes["retired"] = sorted({*current.retired, generation})
        changes["canaries"] = [c for c in current.canaries if c.generation != generation]
    return _write(layout, current.model_copy(update=changes))


def update_routing(layout: StoreLayout, retired: list[str] | None = None,
                   pinned: list[str] | None = None) -> RoutingRecord:
    """Change the retired/pinned lists without switching; the caller holds the release lock.
    A retired generation's canary ends with it."""
    current = read_routing(layout)
    changes: dict = {}
    if retired is not None:
        changes["retired"] = sorted(set(retired))
        changes["canaries"] = [c for c in current.canaries if c.generation not in set(retired)]
    if pinned is not None:
        changes["pinned"] = sorted(set(pinned))
    return _write(layout, current.model_copy(update=changes))
