"""Publish: write the generation (LanceDB version + tag, Parquet lineage, manifest), then switch.

Order matters: everything a reader needs is written first, the routing record last, in one
atomic rename. A crash anywhere before it leaves the previous generation serving.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict

from schemas.generation import (Counts, GenerationManifest, IngestResult, Parsed, Quarantined,
                                ReconcileReport, RunCounts, ValidationReport)
from schemas.indexes import IndexContract, IndexSettings
from schemas.retrieval import RetrievalSettings
from schemas.settings import EmbeddingSettings
from tasks.compiled_encoder import ensure_compiled
from tasks.ingest.changes import ChangeSet
from tasks.ingest.chunk import ChunkSpec
from tasks.ingest.crash_points import crash_point
from tasks.ingest.merge import Base, StagedGeneration
from tasks.markup import md_code, md_text
from tasks.ops.disclosure import quarantine_markdown
from tasks.index.generation_indexes import LEXICAL_COLUMNS, index_generation
from tasks.store.lance_store import write_generation_table
from tasks.store.layout import CHUNKS_TABLE, StoreLayout
from tasks.store.integrity import record_digests, verify_generation
from tasks.store.lineage_store import write_lineage_snapshot, write_source_diff
from tasks.store.manifests import write_manifest
from tasks.store.routing import switch_routing
from tasks.task_wrapper import as_task

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
        built.append(index_generation(lance_table, staged.chunks.select(LEXICAL_COLUMNS),
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


@dataclass(frozen=True)
class Publication:
    """How a release publishes: whether it serves at once, and what the routing history says."""

    promote: bool
    reason: str
    actor: str
    target_tokens: int  # the chunking setting, recorded in the manifest
    embedding_model: str  # the configured model ("minilm", "e5", a folder), recorded
    index: IndexSettings = field(default_factory=IndexSettings)  # the indexes built before the switch
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)  # BM25 parameters of the lexical index
    limits: dict = field(default_factory=dict)  # inspection and sandbox limits, recorded in the manifest
    # the embedding settings, for the query encoder compiled before the switch (None: not compiled)
    embedding: EmbeddingSettings | None = None


def count_run(changes: ChangeSet, parsed: Parsed, runner: str, workers: int,
               stage_seconds: dict[str, float]) -> RunCounts:
    """What this run did: sources added, changed, unchanged, refused, and how it ran."""
    refused = {q.digest for q in parsed.quarantined if q.digest}
    return RunCounts(added=sum(r.digest not in refused for r in changes.added),
                     changed=sum(r.digest not in refused for r in changes.changed),
                     unchanged=len(changes.unchanged), quarantined=len(parsed.quarantined),
                     runner=runner, workers=workers, ocr_pages=parsed.ocr_pages,
                     stage_seconds=dict(stage_seconds))


class PublishInput(BaseModel):
    """The publish step's input: the staged generation, what checked it, how the run went, and
    how it is to be published."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    staged: StagedGeneration
    report: ReconcileReport
    validation: ValidationReport
    run: RunCounts
    quarantined: list[Quarantined]
    spec: ChunkSpec
    base: Base
    layout: StoreLayout
    publication: Publication


def publish(job: PublishInput) -> IngestResult:
    """Write the generation, show it in the UI, and switch to it when it is to serve at once."""
    staged, report, run, quarantined = job.staged, job.report, job.run, job.quarantined
    layout, publication = job.layout, job.publication
    manifest = write_generation(layout, staged.generation, job.base.serving, staged, report, job.validation, run,
                                quarantined, job.spec.segmenter,
                                {"target_tokens": publication.target_tokens, "content_limit": job.spec.content_limit},
                                publication.embedding_model, publication.index, publication.retrieval,
                                publication.limits)
    publish_artifacts(staged.generation, report, run, quarantined)
    if publication.embedding is not None:  # before the switch: the first question finds it
        ensure_compiled(layout.encoders, publication.embedding, staged.space)
    if publication.promote:
        switch_to(layout, manifest, publication.actor, publication.reason,
                  before_switch=lambda: crash_point(layout, "switch"))
    return IngestResult(generation=staged.generation, serving=publication.promote, counts=report.counts,
                        run=run, quarantined=quarantined, manifest=str(layout.manifest_path(staged.generation)),
                        published=True)


publish_task = as_task(publish, "publish")


def nothing_new(base: Base, run: RunCounts, quarantined: list[Quarantined], layout: StoreLayout,
                embedding: EmbeddingSettings | None = None) -> IngestResult:
    """Nothing this run parsed changes the serving generation: nothing is published (a home
    whose serving space has no compiled query encoder yet, published before there were any,
    gets it: once)."""
    if base.serving and embedding is not None:
        ensure_compiled(layout.encoders, embedding, base.space)
    tables = base.tables
    counts = Counts(sources=tables.sources.num_rows, revisions=tables.revisions.num_rows,
                    pages=tables.pages.num_rows, chunks=tables.chunks.num_rows, vectors=len(tables.vectors))
    return IngestResult(generation=base.serving, serving=base.serving is not None, counts=counts, run=run,
                        quarantined=quarantined,
                        manifest=str(layout.manifest_path(base.serving)) if base.serving else None)


def publish_artifacts(generation: str, report: ReconcileReport, run: RunCounts, quarantined) -> None:
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    runs = {k: v for k, v in run.model_dump().items() if k != "stage_seconds"}
    create_table_artifact(
        key="reconcile-counts",
        table=[{"measure": k, "value": v} for k, v in report.counts.model_dump().items()]
        + [{"measure": f"run.{k}", "value": v} for k, v in runs.items()]
        + [{"measure": f"seconds.{k}", "value": v} for k, v in run.stage_seconds.items()]
        + [{"measure": f"diff.{k}", "value": len(v)} for k, v in report.diff.model_dump().items()],
        description=f"Reconcile counts of generation {generation}",
    )
    create_markdown_artifact(key="generation-summary", markdown=summary_markdown(generation, report, run, quarantined),
                             description=f"Generation {generation}")


def summary_markdown(generation: str, report: ReconcileReport, run: RunCounts, quarantined) -> str:
    lines = [f"# Generation {md_text(generation)}", "", f"- digest: {md_code(report.digest[:16])}",
             *(f"- {md_text(k)}: {md_text(v)}" for k, v in report.counts.model_dump().items()),
             f"- added {len(report.diff.added)}, changed {len(report.diff.changed)}, "
             f"unchanged {len(report.diff.unchanged)}, removed {len(report.diff.removed)}",
             f"- ran on {md_text(run.runner)} with {run.workers} worker(s); {run.ocr_pages} page(s) read by OCR"]
    return "\n".join(lines + quarantine_markdown(quarantined))
