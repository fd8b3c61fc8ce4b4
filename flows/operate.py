"""Operator flows: promote, roll back, delete (mask now, new generation, purge), collect garbage."""
from __future__ import annotations

import logging
import time
from datetime import timedelta

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from pydantic import BaseModel, Field

from schemas.generation import RoutingRecord
from schemas.settings import MabillonSettings
from flows.gate import record_publish
from tasks.ops import canary as canaries
from tasks.ops import switching
from tasks.ops.deletion import publish_without
from tasks.ops.retention import GcReport, PurgeReport, collect_garbage, purge_documents
from tasks.store.serialise import serialised_release
from tasks.store.layout import StoreLayout
from tasks.store.routing import read_routing
from tasks.store.tombstones import add_tombstones

log = logging.getLogger(__name__)


class PromoteParams(BaseModel):
    generation: str = Field(description="generation to serve, e.g. g0003")
    reason: str = Field("", description="recorded in the routing history")


class CanaryParams(BaseModel):
    generation: str | None = Field(None, description="candidate served to the groups below (with stop: "
                                                     "whose canary ends; default every canary)")
    groups: list[str] = Field(default_factory=list, description="groups of principals routed to the candidate")
    reason: str = Field("", description="recorded in the routing history and the release record")
    stop: bool = Field(False, description="end the canary instead of starting one")


class RollbackParams(BaseModel):
    to: str | None = Field(None, description="generation to return to (default: the previously serving one)")
    reason: str = ""


class DeleteParams(BaseModel):
    doc_ids: list[str] = Field(description="documents to delete everywhere")
    reason: str = Field("", description="why (rights, request, error) — kept with the tombstone")


class DeletionResult(BaseModel):
    doc_ids: list[str]
    unknown: list[str]
    generation: str | None
    masked_after_s: float  # delete → gone from answers (tombstone in force)
    published_after_s: float | None  # → a generation without them serves
    purged_after_s: float | None  # → gone from disk (None while the retention window runs)
    purge: PurgeReport | None = None


def _routing_markdown(routing: RoutingRecord) -> str:
    last = routing.history[-1] if routing.history else None
    lines = [f"# Serving: {routing.serving}"]
    lines += [f"Canary: {c.generation} → groups {', '.join(c.groups)} (since {c.since:%Y-%m-%d %H:%M:%S})"
              for c in routing.canaries]
    if last:
        lines.append(f"{last.action} by {last.actor} at {last.at:%Y-%m-%d %H:%M:%S}: "
                     f"{last.from_generation} → {last.to_generation}. {last.reason}")
    return "\n\n".join(lines)


def _switch(settings: MabillonSettings | None, switch) -> RoutingRecord:
    """Run one routing switch under the release serialisation and show the result in the UI."""
    settings = settings or MabillonSettings()
    layout = StoreLayout.from_settings(settings)
    with serialised_release(layout):
        routing = switch(layout, settings.actor)
    create_markdown_artifact(key="routing", markdown=_routing_markdown(routing))
    return routing


@flow(name="promote")
def promote(params: PromoteParams, settings: MabillonSettings | None = None) -> RoutingRecord:
    def switch(layout: StoreLayout, actor: str) -> RoutingRecord:
        before = read_routing(layout).serving
        routing = switching.promote(layout, params.generation, actor, params.reason)
        if routing.serving != before:
            record_publish(layout, params.generation, actor, params.reason, action="promote", via="promote")
        return routing
    return _switch(settings, switch)


@flow(name="canary")
def canary(params: CanaryParams, settings: MabillonSettings | None = None) -> RoutingRecord:
    """Route named groups to a candidate (everyone else stays on the serving generation), or end it."""
    settings = settings or MabillonSettings()

    def switch(layout: StoreLayout, actor: str) -> RoutingRecord:
        if params.stop:
            return canaries.stop(layout, actor, params.reason, params.generation)
        if not params.generation:
            raise canaries.CanaryRefused("name the candidate generation the groups are routed to")
        routing = canaries.start(layout, settings, params.generation, params.groups, actor, params.reason)
        record_publish(layout, params.generation, actor, params.reason, action="canary", via="canary")
        return routing
    return _switch(settings, switch)


@flow(name="rollback")
def rollback(params: RollbackParams, settings: MabillonSettings | None = None) -> RoutingRecord:
    return _switch(settings, lambda layout, actor: switching.rollback(layout, actor, params.to, params.reason))


@flow(name="delete")
def delete(params: DeleteParams, settings: MabillonSettings | None = None) -> DeletionResult:
    """Mask at once, publish a generation without them, purge now or after the window."""
    settings = settings or MabillonSettings()
    layout = StoreLayout.from_settings(settings).ensure()
    doc_ids = list(dict.fromkeys(params.doc_ids))
    start = time.perf_counter()
    with serialised_release(layout):
        add_tombstones(layout, doc_ids, settings.actor, params.reason)  # the mask, for every generation
        masked = time.perf_counter() - start
        generation, unknown = publish_without(layout, settings, doc_ids, params.reason)
        published = time.perf_counter() - start if len(unknown) < len(doc_ids) else None
        if published is not None:  # a new generation serves: it gets its release record
            record_publish(layout, generation, settings.actor, f"delete: {params.reason}".strip(), via="delete")
        purge, purged = None, None
        if settings.retention.deletion_window_s <= 0:  # otherwise `mabillon gc` purges once it passed
            purge = purge_documents(layout, set(doc_ids))
            purged = time.perf_counter() - start
    result = DeletionResult(doc_ids=doc_ids, unknown=unknown, generation=generation, masked_after_s=masked,
                            published_after_s=published, purged_after_s=purged, purge=purge)
    create_markdown_artifact(key="deletion", markdown=(
        f"# Deleted {len(doc_ids)} document(s)\n\nmasked after {masked * 1000:.1f} ms; "
        f"new generation {generation}; purged: {'yes' if purge else 'after the retention window'}"))
    return result


@flow(name="gc")
def gc(settings: MabillonSettings | None = None) -> GcReport:
    settings = settings or MabillonSettings()
    layout = StoreLayout.from_settings(settings)
    with serialised_release(layout):
        report = collect_garbage(layout, settings.retention.keep_last,
                                 timedelta(seconds=settings.retention.deletion_window_s))
    create_markdown_artifact(key="gc", markdown=f"# Garbage collection\n\nkept {report.kept}; retired {report.retired}")
    return report


def pin(layout: StoreLayout, generation: str, pinned: bool = True) -> RoutingRecord:
    from tasks.store.routing import update_routing

    with serialised_release(layout):
        routing = read_routing(layout)
        switching.check_servable(layout, generation, routing)
        names = set(routing.pinned)
        names = names | {generation} if pinned else names - {generation}
        return update_routing(layout, pinned=sorted(names))
