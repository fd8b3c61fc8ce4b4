"""Batch-level steps of the release: each a function over contracts, each wrapped as a Prefect task.

The functions take the store layout and settings explicitly, so tests call them directly; the
`*_task` wrappers add the orchestrator (naming, logging, retries) and nothing else.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from prefect import task
from prefect.cache_policies import NONE

from schemas.generation import Quarantined, TombstoneList, ValidationFailed, ValidationReport
from schemas.lineage import Chunk, ParsedDocument, Revision
from schemas.settings import MabillonSettings, StorageSettings
from tasks.ingest.acquire import AccessDefaults, acquire_one, iter_inputs
from tasks.ingest.chunk import ChunkingPlan, chunk_document
from tasks.ingest.embed import Embedder
from tasks.ingest.inspect import inspect_revision
from tasks.ingest.parse import ParseRefused, parse_revision
from tasks.ingest.reconcile import reconcile
from tasks.ingest.stage import StagedGeneration
from tasks.ingest.validate import ValidationPolicy, validate_staged
from tasks.progress import StageProgress
from tasks.store.atomic import atomic_write_text
from tasks.store.blobs import read_blob
from tasks.store.layout import StoreLayout
from tasks.store.staging import load_parsed, load_vectors, save_parsed, save_vectors

log = logging.getLogger(__name__)


def as_task(fn: Callable, name: str):
    """Thin Prefect wrapper: our staging caches do the resuming, so Prefect caches nothing."""
    return task(fn, name=name, cache_policy=NONE, persist_result=False)


def hold_point(settings: MabillonSettings, layout: StoreLayout, name: str) -> None:
    """Test hook: stop at a named point and wait to be killed (crash-safety tests).

    Writes a marker so the test knows the run reached the point. Off unless configured.
    """
    if settings.test_hold_at != name:
        return
    atomic_write_text(layout.manifests / f".held-at-{name}", str(os.getpid()))
    log.warning("holding at %s (test hook), pid %d", name, os.getpid())
    while True:
        time.sleep(1)


# ---- acquire + inspect ---------------------------------------------------------------------

def acquire(sources: list[str], defaults: AccessDefaults, layout: StoreLayout,
            storage: StorageSettings | None = None) -> tuple[list[Revision], list[Quarantined]]:
    """Paths, file:// and s3:// URIs in (`storage`: endpoint and credentials of s3:// inputs)."""
    quarantined: list[Quarantined] = []
    revisions: list[Revision] = []
    seen: dict[str, str] = {}
    pending = list(iter_inputs(sources, defaults, quarantined, storage))
    with StageProgress("acquire", len(pending), "src") as progress:
        for item in pending:
            sid = item.source.source_id
            if sid in seen:
                quarantined.append(Quarantined(uri=item.source.uri,
                                               reason=f"duplicate source {sid!r} in this run (first: {seen[sid]})"))
            else:
                try:
                    revisions.append(acquire_one(layout, item))
                    seen[sid] = item.source.uri
                except OSError as exc:
                    quarantined.append(Quarantined(uri=item.source.uri, reason=f"unreadable: {exc}"))
            progress.advance()
    return revisions, quarantined


def inspect(revisions: list[Revision], layout: StoreLayout, settings: MabillonSettings) -> tuple[list[Revision], list[Quarantined]]:
    accepted, quarantined = [], []
    with StageProgress("inspect", len(revisions), "src") as progress:
        for rev in revisions:
            ok, refused = inspect_revision(rev, read_blob(layout, rev.digest), settings.limits)
            if ok is not None:
                accepted.append(ok)
            else:
                quarantined.append(refused)
                log.warning("quarantined %s: %s", refused.uri, refused.reason)
            progress.advance()
    return accepted, quarantined


def refuse_tombstoned(revisions: list[Revision], tombstones: TombstoneList) -> tuple[list[Revision], list[Quarantined]]:
    """A deleted document stays deleted: re-ingesting it is refused, not silently served again."""
    dead = {t.doc_id: t for t in tombstones.tombstones}
    kept, refused = [], []
    for rev in revisions:
        t = dead.get(rev.doc_id)
        if t is None:
            kept.append(rev)
        else:
            refused.append(Quarantined(uri=rev.uri, digest=rev.digest,
                                       reason=f"document {rev.doc_id!r} was deleted on {t.at:%Y-%m-%d} "
                                              f"({t.reason or 'no reason given'}); not re-ingested"))
    return kept, refused


# ---- classify against the serving generation --------------------------------------------------

@dataclass
class RunPlan:
    added: list[Revision] = field(default_factory=list)
    changed: list[Revision] = field(default_factory=list)
    unchanged: list[Revision] = field(default_factory=list)
    # current revisions of the serving generation that must be redone (another embedding space)
    carried_reprocess: list[Revision] = field(default_factory=list)

    @property
    def to_process(self) -> list[Revision]:
        return [*self.added, *self.changed, *self.carried_reprocess]

    @property
    def changes_anything(self) -> bool:
        return bool(self.added or self.changed or self.carried_reprocess)


def classify(accepted: list[Revision], base_sources: pa.Table, base_revisions: list[Revision],
             base_space_id: str | None, space_id: str) -> RunPlan:
    current = dict(zip(base_sources["source_id"].to_pylist(), base_sources["current_revision_id"].to_pylist()))
    plan = RunPlan()
    for rev in accepted:
        if rev.source_id not in current:
            plan.added.append(rev)
        elif current[rev.source_id] != rev.revision_id:
            plan.changed.append(rev)
        else:
            plan.unchanged.append(rev)
    if base_space_id is not None and base_space_id != space_id:
        touched = {r.source_id for r in plan.to_process}
        plan.carried_reprocess = [r for r in base_revisions if r.source_id not in touched]
    return plan


# ---- parse --------------------------------------------------------------------------------

def parse_key(settings: MabillonSettings) -> str:
    """Parsed output depends on the OCR and limit settings; a change re-parses."""
    # Worker and thread counts change how fast, not what: they stay out of the key.
    ocr = settings.ocr.model_dump(exclude={"workers", "tesseract_threads"})
    blob = json.dumps({"ocr": ocr, "v": 1}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def parse(revisions: list[Revision], layout: StoreLayout, settings: MabillonSettings) -> tuple[dict[str, ParsedDocument], list[Quarantined]]:
    key = parse_key(settings)
    parsed: dict[str, ParsedDocument] = {}
    quarantined: list[Quarantined] = []
    with StageProgress("parse", len(revisions), "doc") as progress:
        for rev in revisions:
            doc = load_parsed(layout, rev.revision_id, key)
            if doc is None:
                try:
                    doc = parse_revision(read_blob(layout, rev.digest), rev, settings)
                except ParseRefused as exc:
                    quarantined.append(Quarantined(uri=rev.uri, reason=str(exc), digest=rev.digest))
                    progress.advance()
                    continue
                except Exception as exc:  # a parser bug on one file must not sink the batch
                    log.exception("parser failed on %s", rev.uri)
                    quarantined.append(Quarantined(uri=rev.uri, digest=rev.digest,
                                                   reason=f"parser error: {type(exc).__name__}: {exc}"))
                    progress.advance()
                    continue
                save_parsed(layout, doc, key)
            parsed[rev.revision_id] = doc
            progress.advance()
    return parsed, quarantined


# ---- chunk -------------------------------------------------------------------------------

def chunk(parsed: dict[str, ParsedDocument], revisions: list[Revision], plan: ChunkingPlan,
          embedder: Embedder) -> list[Chunk]:
    chunks: list[Chunk] = []
    with StageProgress("chunk", len(revisions), "doc") as progress:
        for rev in revisions:
            if rev.revision_id in parsed:
                chunks.extend(chunk_document(parsed[rev.revision_id], rev.doc_id, plan, embedder.count_tokens))
            progress.advance()
    return chunks


# ---- embed -------------------------------------------------------------------------------

def embed(chunks: list[Chunk], embedder: Embedder, plan: ChunkingPlan, layout: StoreLayout,
          settings: MabillonSettings, on_batch: Callable[[], None] | None = None) -> tuple[np.ndarray, int]:
    """Vectors row-aligned with `chunks`, and how many were computed (the rest from cache).

    Work is grouped by revision and each finished revision is cached at once, so a run killed
    mid-way resumes where it stopped.
    """
    space_id = embedder.space.space_id
    by_rev: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        by_rev.setdefault(c.revision_id, []).append(i)
    vectors = np.zeros((len(chunks), embedder.space.dim), np.float32)
    todo: list[str] = []
    for rev, idx in by_rev.items():
        cached = load_vectors(layout, space_id, plan.segmenter_id, rev)
        if cached and cached[0] == [chunks[i].chunk_id for i in idx]:
            vectors[idx] = cached[1]
        else:
            todo.append(rev)
    computed = 0
    batch_chunks = max(1, settings.embedding.batch_size) * 4
    with StageProgress("embed", sum(len(by_rev[r]) for r in todo), "chunk") as progress:
        group: list[str] = []
        for n, rev in enumerate(todo, start=1):
            group.append(rev)
            if sum(len(by_rev[r]) for r in group) < batch_chunks and n < len(todo):
                continue
            idx = [i for r in group for i in by_rev[r]]
            out = embedder.embed_documents([chunks[i].text for i in idx])
            vectors[idx] = out
            for r in group:
                save_vectors(layout, space_id, plan.segmenter_id, r,
                             [chunks[i].chunk_id for i in by_rev[r]], vectors[by_rev[r]])
            computed += len(idx)
            progress.advance(len(idx))
            group = []
            if on_batch:
                on_batch()
    return vectors, computed


# ---- validate ----------------------------------------------------------------------------

def validate(staged: StagedGeneration, policy: ValidationPolicy, layout: StoreLayout, label: str) -> ValidationReport:
    report = validate_staged(staged.chunks, staged.vectors, policy)
    path = layout.reports / f"{label}-validation.md"
    atomic_write_text(path, f"# Validation of {label}\n\n"
                            f"**{'passed' if report.success else 'FAILED — nothing published'}**\n\n"
                            + report.to_markdown() + "\n")
    if not report.success:
        raise ValidationFailed(report, str(path))
    return report


acquire_task = as_task(acquire, "acquire")
inspect_task = as_task(inspect, "inspect")
parse_task = as_task(parse, "parse")
chunk_task = as_task(chunk, "chunk")
embed_task = as_task(embed, "embed")
validate_task = as_task(validate, "validate")
reconcile_task = as_task(reconcile, "reconcile")
