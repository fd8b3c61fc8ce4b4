"""Publish: write the generation (LanceDB version + tag, Parquet lineage, manifest), then switch.

Order matters: everything a reader needs is written first, the routing record last, in one
atomic rename. A crash anywhere before it leaves the previous generation serving.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone

from schemas.generation import GenerationManifest, Quarantined, ReconcileReport, RunCounts, ValidationReport
from schemas.indexes import IndexContract, IndexSettings
from schemas.retrieval import RetrievalSettings
from tasks.ingest.merge import StagedGeneration
from tasks.query.indexing import index_generation
from tasks.store.lance_store import write_generation_table
from tasks.store.layout import CHUNKS_TABLE, StoreLayout
from tasks.store.integrity import record_digests, verify_generation
from tasks.store.lineage_store import write_lineage_snapshot, write_source_diff
from tasks.store.manifests import write_manifest
from tasks.store.routing import switch_routing

log = logging.getLogger(__name__)


def write_generation(layout: StoreLayout, generation: str, parent: str | None,
                     staged: StagedGeneration, report: ReconcileReport, validation: ValidationReport,
                     run: RunCounts, quarantined: list[Quarantined], segmenter: str,
                     chunking: dict, embedding_model: str, index: IndexSettings | None = None,
                     retrieval: RetrievalSettings | None = None,
                     limits: dict | None = None) -> GenerationManifest:
    """Everything but the switch: after this the generation exists, staged, not serving, with
    its indexes (the index contract in its manifest)."""
    built: list[IndexContract] = []

    def prepare(lance_table) -> None:
        built.append(index_generation(lance_table, staged.chunks.select(["chunk_id", "text"]),
                                      layout.index_dir(generation), index or IndexSettings(),
                                      retrieval or RetrievalSettings()))
    version = write_generation_table(layout, generation, staged.lance_table(), prepare)
    lineage_dir = write_lineage_snapshot(layout, generation, staged.lineage_tables())
    diff = write_source_diff(layout, generation, report.diff)
    parsers = {}
    for name, ver in zip(staged.pages["parser"].to_pylist(), staged.pages["parser_version"].to_pylist()):
        parsers[name] = ver
    manifest = GenerationManifest(
        generation=generation, created_at=datetime.now(timezone.utc), parent=parent,
        embedding_space=staged.space, space_id=staged.space.space_id, embedding_model=embedding_model,
        lance_table=CHUNKS_TABLE,
        lance_version=version, lance_tag=generation, lineage_dir=lineage_dir, counts=report.counts,
        digest=report.digest, diff=diff, run=run, quarantined=quarantined,
        segmenter=segmenter, parsers=dict(sorted(parsers.items())), chunking=chunking, limits=limits or {},
        validation={"success": validation.success, "expectations": len(validation.results)},
        indexes=built[0],
    )
    write_manifest(layout, manifest)
    record_digests(layout, generation)
    log.info("generation %s written: %s", generation, report.counts)
    return manifest


def switch_to(layout: StoreLayout, manifest: GenerationManifest, actor: str, reason: str,
              before_switch: Callable[[], None] | None = None) -> None:
    if before_switch:
        before_switch()
    verify_generation(layout, manifest.generation)  # what is switched to is what was written
    switch_routing(layout, manifest.generation, manifest.space_id, "publish", actor, reason)
    log.info("generation %s now serving", manifest.generation)
