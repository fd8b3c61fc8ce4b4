"""Publish the serving generation again without deleted documents, through the same gates."""
from __future__ import annotations

from schemas.generation import ReconcileFailed, RunCounts
from schemas.settings import MabillonSettings
from tasks.ingest.publish import switch_to, write_generation
from tasks.ingest.reconcile import reconcile
from tasks.ingest.merge import load_serving, remove_sources
from tasks.ingest.validate import validate
from tasks.ingest.validate import ValidationPolicy
from tasks.store.lance_store import tagged_generations
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import lineage_generations
from tasks.store.manifests import next_generation_id, read_manifest
from tasks.store.routing import read_routing
from tasks.store.tombstones import read_tombstones


def publish_without(layout: StoreLayout, settings: MabillonSettings, doc_ids: list[str],
                    reason: str) -> tuple[str | None, list[str]]:
    """(generation now serving, doc ids the serving generation did not hold).

    The caller holds the release lock. Nothing is published when none of the documents is
    served; the generation is validated and reconciled like any release, so a deletion can
    never serve a broken generation.
    """
    serving = read_routing(layout).serving
    if serving is None:
        return None, list(doc_ids)
    previous = read_manifest(layout, serving)
    _, base, _ = load_serving(layout, previous.embedding_space)
    served = dict(zip(base.sources["doc_id"].to_pylist(), base.sources["source_id"].to_pylist()))
    unknown = [d for d in doc_ids if d not in served]
    if len(unknown) == len(doc_ids):
        return serving, unknown
    staged = remove_sources(base, {served[d] for d in doc_ids if d in served})
    generation = next_generation_id(layout, [*tagged_generations(layout), *lineage_generations(layout)])
    validation = validate(staged, ValidationPolicy.from_settings(settings.validation, staged.space.dim),
                          layout, generation)
    report = reconcile(staged, base.sources, tombstoned=read_tombstones(layout).doc_ids)
    if not report.ok:
        raise ReconcileFailed(report)
    manifest = write_generation(layout, generation, serving, staged, report, validation, RunCounts(), [],
                                previous.segmenter, previous.chunking, previous.embedding_model,
                                settings.index, settings.retrieval)
    switch_to(layout, manifest, settings.actor, f"delete: {reason}".strip())
    return generation, unknown
