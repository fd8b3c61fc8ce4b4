"""Retention and physical removal: retire old generations, purge deleted documents everywhere.

Runs under the release lock (the caller holds it). LanceDB keeps rows in every tagged version,
so purging a document rewrites each retained generation that holds it (moving its tag), then
prunes every version no tag points to. Lineage snapshots, derived indexes, caches,
source blobs and query records are cleaned in the same pass.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pyarrow as pa
from pydantic import BaseModel, Field

from schemas.generation import PurgeRecord
from schemas.indexes import IndexSettings
from schemas.retrieval import RetrievalSettings
from tasks.ops.redact import needles_for, redact_records
from tasks.index.generation_indexes import LEXICAL_COLUMNS, index_generation
from tasks.store.blobs import remove_blobs
from tasks.store.cache import remove_cached_revisions, remove_encoders
from tasks.store.integrity import record_digests
from tasks.store.lance_store import delete_generation_tag, prune_untagged_versions, rewrite_generation_table
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import has_lineage, read_lineage_table, remove_documents, remove_lineage, without
from tasks.store.manifests import append_purge, list_generations, read_manifest
from tasks.store.routing import read_routing, update_routing
from tasks.store.tombstones import mark_purged, read_tombstones

log = logging.getLogger(__name__)


class PurgeReport(BaseModel):
    doc_ids: list[str]
    generations_rewritten: list[str] = Field(default_factory=list)
    chunks_removed: int = 0
    blobs_removed: int = 0
    cache_files_removed: int = 0
    query_records_redacted: int = 0
    lance: dict = Field(default_factory=dict)


class GcReport(BaseModel):
    kept: list[str]
    retired: list[str]
    purge: PurgeReport | None = None
    cache_files_removed: int = 0
    blobs_removed: int = 0
    lance: dict = Field(default_factory=dict)


def retained_generations(layout: StoreLayout) -> list[str]:
    retired = set(read_routing(layout).retired)
    return [g for g in list_generations(layout) if g not in retired and has_lineage(layout, g)]


def plan_retention(layout: StoreLayout, keep_last: int) -> tuple[list[str], list[str]]:
    routing = read_routing(layout)
    live = retained_generations(layout)
    keep = set(live[-keep_last:] if keep_last > 0 else [])
    canaries = {c.generation for c in routing.canaries}
    keep |= {g for g in live if g == routing.serving or g in routing.pinned or g in canaries}
    return [g for g in live if g in keep], [g for g in live if g not in keep]


def _referenced(layout: StoreLayout, generations: list[str]) -> tuple[set[str], set[str]]:
    """Revision ids and blob digests that retained generations still need."""
    revisions, digests = set(), set()
    for g in generations:
        t = read_lineage_table(layout, g, "revisions", ["revision_id", "digest"])
        revisions.update(t["revision_id"].to_pylist())
        digests.update(t["digest"].to_pylist())
    return revisions, digests


def remove_unreferenced_state(layout: StoreLayout, generations: list[str],
                              only_revisions: set[str] | None = None,
                              only_digests: set[str] | None = None) -> tuple[int, int]:
    """Staging caches and blobs no retained generation refers to (optionally only these)."""
    live_revs, live_digests = _referenced(layout, generations)
    return (remove_cached_revisions(layout, live_revs, only_revisions),
            remove_blobs(layout, live_digests, only_digests))


def purge_documents(layout: StoreLayout, doc_ids: set[str]) -> PurgeReport:
    """Remove every trace of these documents from retained generations and caches."""
    report = PurgeReport(doc_ids=sorted(doc_ids))
    gone_revisions, gone_digests, gone_chunks, texts = set(), set(), set(), []
    generations = retained_generations(layout)
    for gen in generations:
        removed = remove_documents(layout, gen, doc_ids)
        if removed is None:
            continue
        gone_revisions |= removed.revision_ids
        gone_digests |= removed.digests
        gone_chunks |= removed.chunk_ids
        texts += removed.texts
        layout.index_dir(gen).remove_tree()  # indexes hold the rows too: rebuilt below
        contract = read_manifest(layout, gen).indexes
        rebuilt = []

        def reindex(lance_table, rows: pa.Table, like=contract, gen=gen) -> None:
            if like is not None:  # same algorithm and parameters as the manifest records
                rebuilt.append(index_generation(lance_table, rows.select(LEXICAL_COLUMNS),
                                                layout.index_dir(gen), IndexSettings(),
                                                RetrievalSettings(), like=like))
        before, after = rewrite_generation_table(
            layout, gen, lambda t: without(t, "doc_id", doc_ids), reindex)
        report.chunks_removed += before - after
        # the manifest is never rewritten: the purge, and the indexes rebuilt over the rewritten
        # rows with the manifest's parameters, are recorded beside it
        append_purge(layout, gen, PurgeRecord(at=datetime.now(timezone.utc),
                                              sources_removed=sorted(removed.source_ids),
                                              indexes=rebuilt[0] if rebuilt else None))
        record_digests(layout, gen)  # the files were rewritten on purpose
        report.generations_rewritten.append(gen)
    caches, blobs = remove_unreferenced_state(layout, generations, gone_revisions, gone_digests)
    report.cache_files_removed, report.blobs_removed = caches, blobs
    report.query_records_redacted = redact_records(layout.queries, needles_for(doc_ids, gone_chunks, texts))
    report.lance = prune_untagged_versions(layout)
    mark_purged(layout, doc_ids)
    log.info("purged %s from %d generations", sorted(doc_ids), len(report.generations_rewritten))
    return report


def due_for_purge(layout: StoreLayout, window: timedelta) -> set[str]:
    now = datetime.now(timezone.utc)
    return {t.doc_id for t in read_tombstones(layout).tombstones
            if t.purged_at is None and t.at + window <= now}


def remove_generation_data(layout: StoreLayout, generation: str) -> None:
    """Its Lance tag, lineage and indexes (the manifest stays, as the record of what it was);
    blobs and caches go with the next `remove_unreferenced_state`. Caller holds the lock."""
    delete_generation_tag(layout, generation)
    remove_lineage(layout, generation)
    layout.index_dir(generation).remove_tree()


def collect_garbage(layout: StoreLayout, keep_last: int, deletion_window: timedelta) -> GcReport:
    kept, retire = plan_retention(layout, keep_last)
    for gen in retire:
        remove_generation_data(layout, gen)
    if retire:
        update_routing(layout, retired=[*read_routing(layout).retired, *retire])
    due = due_for_purge(layout, deletion_window)
    purge = purge_documents(layout, due) if due else None
    caches, blobs = remove_unreferenced_state(layout, kept)
    caches += remove_unused_encoders(layout, kept)
    lance = prune_untagged_versions(layout)
    return GcReport(kept=kept, retired=retire, purge=purge, cache_files_removed=caches,
                    blobs_removed=blobs, lance=lance)


def remove_unused_encoders(layout: StoreLayout, generations: list[str]) -> int:
    """Compiled query encoders of embedding spaces no retained generation is in."""
    return remove_encoders(layout, {read_manifest(layout, g).space_id for g in generations})


def manifest_counts(layout: StoreLayout, generation: str):
    return read_manifest(layout, generation).counts
