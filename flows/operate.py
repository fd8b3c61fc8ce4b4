"""Operator flows: promote, roll back, delete (mask now, new generation, purge), collect garbage."""
from __future__ import annotations

import logging
import time
from datetime import timedelta

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from pydantic import BaseModel, Field

from schemas.generation import RoutingRecord, RunCounts
from schemas.settings import MabillonSettings
from tasks.ingest.publish import switch_to, write_generation
from tasks.ingest.reconcile import reconcile
from tasks.ingest.stage import load_serving, remove_sources
from tasks.ingest.steps import validate
from tasks.ingest.validate import ValidationPolicy
from tasks.ops import switching
from tasks.ops.retention import GcReport, PurgeReport, collect_garbage, purge_documents
from tasks.store.serialise import serialised_release
from tasks.store.lance_store import tagged_generations
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import lineage_generations
from tasks.store.manifests import next_generation_id, read_manifest
from tasks.store.routing import read_routing
from tasks.store.tombstones import add_tombstones, read_tombstones

log = logging.getLogger(__name__)


class PromoteParams(BaseModel):
    generation: str = Field(description="generation to serve, e.g. g0003")
    reason: str = Field("", description="recorded in the routing history")


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
    if last:
        lines.append(f"{last.action} by {last.actor} at {last.at:%Y-%m-%d %H:%M:%S}: "
                     f"{last.from_generation} → {last.to_generation}. {last.reason}")
    return "\n\n".join(lines)


@flow(name="promote")
def promote(params: PromoteParams, settings: MabillonSettings | None = None) -> RoutingRecord:
    settings = settings or MabillonSettings()
    layout = StoreLayout.from_settings(settings)
    with serialised_release(layout):
        routing = switching.promote(layout, params.generation, settings.actor, params.reason)
    create_markdown_artifact(key="routing", markdown=_routing_markdown(routing))
    return routing


@flow(name="rollback")
def rollback(params: RollbackParams, settings: MabillonSettings | None = None) -> RoutingRecord:
    settings = settings or MabillonSettings()
    layout = StoreLayout.from_settings(settings)
    with serialised_release(layout):
        routing = switching.rollback(layout, settings.actor, params.to, params.reason)
    create_markdown_artifact(key="routing", markdown=_routing_markdown(routing))
    return routing


@flow(name="delete")
def delete(params: DeleteParams, settings: MabillonSettings | None = None) -> DeletionResult:
    settings = settings or MabillonSettings()
    layout = StoreLayout.from_settings(settings).ensure()
    doc_ids = list(dict.fromkeys(params.doc_ids))
    start = time.perf_counter()
    with serialised_release(layout):
        # 1. the mask: in force for every generation from this atomic write on
        add_tombstones(layout, doc_ids, settings.actor, params.reason)
        masked = time.perf_counter() - start
        serving = read_routing(layout).serving
        base = load_serving(layout, read_manifest(layout, serving).embedding_space)[1] if serving else None
        present = set(base.sources["doc_id"].to_pylist()) if base is not None else set()
        unknown = [d for d in doc_ids if d not in present]
        generation, published = serving, None
        if serving and len(unknown) < len(doc_ids):
            # 2. a generation without them, through the same validation and reconcile gates
            source_ids = {s for s, d in zip(base.sources["source_id"].to_pylist(), base.sources["doc_id"].to_pylist())
                          if d in set(doc_ids)}
            staged = remove_sources(base, source_ids)
            generation = next_generation_id(layout, [*tagged_generations(layout), *lineage_generations(layout)])
            validation = validate(staged, ValidationPolicy.from_settings(settings.validation, staged.space.dim),
                                  layout, generation)
            report = reconcile(staged, base.sources, tombstoned=read_tombstones(layout).doc_ids)
            if not report.ok:
                raise RuntimeError("reconcile failed after deletion: " + "; ".join(report.problems))
            previous = read_manifest(layout, serving)
            manifest = write_generation(layout, generation, serving, staged, report, validation, RunCounts(),
                                        [], previous.segmenter, previous.chunking, previous.embedding_model)
            switch_to(layout, manifest, settings.actor, f"delete: {params.reason}".strip())
            published = time.perf_counter() - start
        # 3. physical removal, now or once the retention window has passed (`mabillon gc`)
        purge, purged = None, None
        if settings.retention.deletion_window_s <= 0:
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
