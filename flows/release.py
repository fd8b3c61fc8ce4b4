"""The release flow: sources in, a validated, reconciled, atomically published generation out."""
from __future__ import annotations

import logging

from prefect import flow
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from pydantic import BaseModel, Field

from schemas.generation import Counts, IngestResult, ReconcileFailed, ReconcileReport, RunCounts
from schemas.settings import MabillonSettings
from flows.gate import gate_applies, hold_for_decision, record_publish
from tasks.ingest.acquire import AccessDefaults
from tasks.ingest.chunk import plan_for
from tasks.embedding import load_embedder, space_cache_key
from tasks.ingest.publish import switch_to, write_generation
from tasks.ingest.merge import StagedGeneration, chunks_table, load_serving, merge_generation, \
    pages_and_elements, revision_from_row
from tasks.ingest.acquire import acquire_task, refuse_tombstoned
from tasks.ingest.changes import classify
from tasks.ingest.chunk import chunk_task
from tasks.ingest.crash_points import crash_point
from tasks.ingest.embed import embed_task
from tasks.ingest.inspect import inspect_task
from tasks.ingest.parse import parse_task
from tasks.ingest.reconcile import reconcile_task
from tasks.ingest.validate import validate_task
from tasks.ingest.validate import ValidationPolicy
from tasks.store.serialise import serialised_release
from tasks.store.lance_store import tagged_generations
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import lineage_generations
from tasks.store.manifests import next_generation_id
from tasks.store.cache import load_space, save_space
from tasks.store.tombstones import read_tombstones

log = logging.getLogger(__name__)


class ReleaseOptions(BaseModel):
    """What an archivist chooses for one ingest run (the parameter form in the UI)."""

    corpus: str | None = Field(None, description="corpus of inputs that do not name one")
    tenant: str | None = Field(None, description="tenant of inputs that do not name one (default: 'default')")
    groups: list[str] | None = Field(None, description="access groups (default: ['public'])")
    promote: bool = Field(True, description="serve the new generation at once")
    reason: str = Field("ingest", description="recorded in the routing history")
    gate: bool | None = Field(None, description="publish staged, shadow it and wait for a person's decision "
                                                "in the Prefect UI (default: the gate setting)")
    gate_timeout_s: int | None = Field(None, ge=1, description="how long a gated release waits for the "
                                                               "decision (default: the gate setting)")
    defer: list[str] = Field(default_factory=list, description="file:// URIs of folder files left for "
                                                               "the next run (still being written)")


def _publish_artifacts(generation: str, report: ReconcileReport, run: RunCounts, quarantined) -> None:
    create_table_artifact(
        key="reconcile-counts",
        table=[{"measure": k, "value": v} for k, v in report.counts.model_dump().items()]
        + [{"measure": f"run.{k}", "value": v} for k, v in run.model_dump().items()]
        + [{"measure": f"diff.{k}", "value": len(v)} for k, v in report.diff.model_dump().items()],
        description=f"Reconcile counts of generation {generation}",
    )
    lines = [f"# Generation {generation}", "", f"- digest: `{report.digest[:16]}`",
             *(f"- {k}: {v}" for k, v in report.counts.model_dump().items()),
             f"- added {len(report.diff.added)}, changed {len(report.diff.changed)}, "
             f"unchanged {len(report.diff.unchanged)}, removed {len(report.diff.removed)}"]
    if quarantined:
        lines += ["", "## Quarantined", "", "| input | reason |", "|---|---|",
                  *(f"| {q.uri} | {q.reason} |" for q in quarantined)]
    create_markdown_artifact(key="generation-summary", markdown="\n".join(lines),
                             description=f"Generation {generation}")


@flow(name="release", log_prints=False)
def release(paths: list[str], options: ReleaseOptions | None = None,
            settings: MabillonSettings | None = None) -> IngestResult:
    options = options or ReleaseOptions()
    settings = settings or MabillonSettings()
    gated = gate_applies(options.gate, settings)
    layout = StoreLayout.from_settings(settings).ensure()
    space_key = space_cache_key(settings.embedding)
    space = load_space(layout, space_key)
    if space is None:
        space = load_embedder(settings.embedding).space
        save_space(layout, space_key, space)
    defaults = AccessDefaults(corpus=options.corpus, tenant=options.tenant or settings.default_tenant,
                              groups=tuple(options.groups or settings.default_groups))

    with serialised_release(layout):
        serving, base, base_space_id = load_serving(layout, space)
        revisions, quarantined = acquire_task([str(p) for p in paths], defaults, layout, settings.storage,
                                              options.defer)
        revisions, refused = refuse_tombstoned(revisions, read_tombstones(layout))
        quarantined += refused
        accepted, refused = inspect_task(revisions, layout, settings)
        quarantined += refused
        base_current = [revision_from_row(r) for r in base.revisions.to_pylist() if r["is_current"]]
        plan = classify(accepted, base.sources, base_current, base_space_id, space.space_id)
        parsed, refused = parse_task(plan.to_process, layout, settings)
        quarantined += refused
        refused_ids = {q.digest for q in refused}
        run = RunCounts(added=sum(r.digest not in refused_ids for r in plan.added),
                        changed=sum(r.digest not in refused_ids for r in plan.changed),
                        unchanged=len(plan.unchanged), quarantined=len(quarantined))
        processed = [r for r in plan.to_process if r.revision_id in parsed]
        if not processed:
            return IngestResult(generation=serving, serving=serving is not None,
                                counts=_counts(base), run=run, quarantined=quarantined,
                                manifest=str(layout.manifest_path(serving)) if serving else None)

        embedder = load_embedder(settings.embedding)  # only now: loading a model costs seconds
        space = embedder.space
        chunk_plan = plan_for(embedder.count_tokens, settings.chunking.target_tokens,
                              space.max_input_tokens, space.space_id[:8])
        chunks = chunk_task(parsed, processed, chunk_plan, embedder)
        vectors, _ = embed_task(chunks, embedder, chunk_plan, layout, settings,
                                on_batch=lambda: crash_point(settings, layout, "embed"))
        generation = next_generation_id(layout, [*tagged_generations(layout), *lineage_generations(layout)])
        pages, elements = pages_and_elements([parsed[r.revision_id] for r in processed])
        staged = merge_generation(base, processed, pages, elements,
                                  chunks_table(chunks, {r.revision_id: r for r in processed}),
                                  vectors, generation, space)
        validation = validate_task(staged, ValidationPolicy.from_settings(settings.validation, space.dim),
                                   layout, generation)
        report = reconcile_task(staged, base.sources if serving else None)
        if not report.ok:
            raise ReconcileFailed(report)
        manifest = write_generation(layout, generation, serving, staged, report, validation, run,
                                    quarantined, chunk_plan.segmenter,
                                    {"target_tokens": settings.chunking.target_tokens,
                                     "content_limit": chunk_plan.content_limit},
                                    settings.embedding.model, settings.index, settings.retrieval,
                                    {"inspection": settings.limits.model_dump(),
                                     "sandbox": settings.sandbox.model_dump()})
        _publish_artifacts(generation, report, run, quarantined)
        promote = options.promote and not gated  # a gated candidate serves only once approved
        if promote:
            switch_to(layout, manifest, settings.actor, options.reason,
                      before_switch=lambda: crash_point(settings, layout, "switch"))
            record = record_publish(layout, generation, settings.actor, options.reason)
        result = IngestResult(generation=generation, serving=promote, counts=report.counts, run=run,
                              quarantined=quarantined, manifest=str(layout.manifest_path(generation)),
                              published=True, release_record=record if promote else None)
    return hold_for_decision(result, settings, options.gate_timeout_s) if gated else result  # the wait holds no lock


def _counts(staged: StagedGeneration) -> Counts:
    return Counts(sources=staged.sources.num_rows, revisions=staged.revisions.num_rows,
                  pages=staged.pages.num_rows, chunks=staged.chunks.num_rows, vectors=len(staged.vectors))
