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
import pyarrow.compute as pc
import yaml
from pydantic import BaseModel, Field

from schemas.indexes import IndexSettings
from schemas.retrieval import RetrievalSettings
from tasks.ops.redact import needles_for, redact_records
from tasks.index.generation_indexes import LEXICAL_COLUMNS, index_generation
from tasks.store.atomic import atomic_write_text
from tasks.store.lance_store import delete_generation_tag, prune_untagged_versions, rewrite_generation_table
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import LINEAGE_TABLES, drop_from_source_diff, has_lineage, read_lineage_table
from tasks.store.integrity import record_digests
from tasks.store.manifests import list_generations, read_manifest
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


def _filter(table: pa.Table, column: str, values: set[str]) -> pa.Table:
    if not values or table.num_rows == 0:
        return table
    return table.filter(pc.invert(pc.is_in(table[column], value_set=pa.array(sorted(values), pa.string()))))


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
    caches = 0
    for rev_dir in (layout.caches / "parsed").subfolders():
        if rev_dir.name not in live_revs and (only_revisions is None or rev_dir.name in only_revisions):
            rev_dir.remove_tree()
            caches += 1
    for cached in (layout.caches / "vectors").files():
        rev = cached.stem
        if cached.name.endswith(".parquet") and rev not in live_revs and (
                only_revisions is None or rev in only_revisions):
            cached.unlink()
            caches += 1
    blobs = 0
    for blob in layout.blobs.files():
        if blob.name not in live_digests and (only_digests is None or blob.name in only_digests):
            blob.unlink()
            blobs += 1
    return caches, blobs


def purge_documents(layout: StoreLayout, doc_ids: set[str]) -> PurgeReport:
    """Remove every trace of these documents from retained generations and caches."""
    report = PurgeReport(doc_ids=sorted(doc_ids))
    gone_revisions, gone_digests, gone_chunks, texts = set(), set(), set(), []
    generations = retained_generations(layout)
    for gen in generations:
        tables = {name: read_lineage_table(layout, gen, name) for name in LINEAGE_TABLES}
        sources = tables["sources"]
        hit = pc.is_in(sources["doc_id"], value_set=pa.array(sorted(doc_ids), pa.string()))
        source_ids = set(sources.filter(hit)["source_id"].to_pylist())
        if not source_ids:
            continue
        revs = tables["revisions"].filter(pc.is_in(tables["revisions"]["source_id"],
                                                   value_set=pa.array(sorted(source_ids), pa.string())))
        rev_ids = set(revs["revision_id"].to_pylist())
        gone_revisions |= rev_ids
        gone_digests |= set(revs["digest"].to_pylist())
        doomed = tables["chunks"].filter(pc.is_in(tables["chunks"]["revision_id"],
                                                  value_set=pa.array(sorted(rev_ids), pa.string())))
        chunk_ids = set(doomed["chunk_id"].to_pylist())
        gone_chunks |= chunk_ids
        texts += doomed["text"].to_pylist()
        rewritten = {
            "sources": _filter(sources, "source_id", source_ids),
            "revisions": _filter(tables["revisions"], "source_id", source_ids),
            "pages": _filter(tables["pages"], "revision_id", rev_ids),
            "elements": _filter(tables["elements"], "revision_id", rev_ids),
            "chunks": _filter(tables["chunks"], "revision_id", rev_ids),
            "vectors": _filter(tables["vectors"], "chunk_id", chunk_ids),
        }
        for name, table in rewritten.items():
            (layout.lineage_dir(gen) / f"{name}.parquet").write_parquet(table)
        drop_from_source_diff(layout, gen, source_ids)
        layout.index_dir(gen).remove_tree()  # indexes hold the rows too: rebuilt below
        contract = read_manifest(layout, gen).indexes
        rebuilt = []

        def reindex(lance_table, rows: pa.Table, like=contract, gen=gen) -> None:
            if like is not None:  # same algorithm and parameters as the manifest records
                rebuilt.append(index_generation(lance_table, rows.select(LEXICAL_COLUMNS),
                                                layout.index_dir(gen), IndexSettings(),
                                                RetrievalSettings(), like=like))
        before, after = rewrite_generation_table(
            layout, gen, lambda t: _filter(t, "doc_id", doc_ids), reindex)
        report.chunks_removed += before - after
        _record_purge(layout, gen, sorted(source_ids), rebuilt[0] if rebuilt else None)
        record_digests(layout, gen)  # the files were rewritten on purpose
        report.generations_rewritten.append(gen)
    caches, blobs = remove_unreferenced_state(layout, generations, gone_revisions, gone_digests)
    report.cache_files_removed, report.blobs_removed = caches, blobs
    report.query_records_redacted = redact_records(layout.queries, needles_for(doc_ids, gone_chunks, texts))
    report.lance = prune_untagged_versions(layout)
    mark_purged(layout, doc_ids)
    log.info("purged %s from %d generations", sorted(doc_ids), len(report.generations_rewritten))
    return report


def _record_purge(layout: StoreLayout, generation: str, source_ids: list[str], indexes=None) -> None:
    """Amendments sit beside the manifest, which itself is never rewritten (the indexes rebuilt
    over the rewritten rows, with the manifest's parameters, are recorded here)."""
    path = layout.generations / f"{generation}.purges.yaml"
    entries = yaml.safe_load(path.read_text("utf-8")) if path.exists() else []
    entry = {"at": datetime.now(timezone.utc).isoformat(), "sources_removed": source_ids}
    if indexes is not None:
        entry["indexes"] = indexes.model_dump(mode="json")
    entries.append(entry)
    atomic_write_text(path, yaml.safe_dump(entries, allow_unicode=True))


def due_for_purge(layout: StoreLayout, window: timedelta) -> set[str]:
    now = datetime.now(timezone.utc)
    return {t.doc_id for t in read_tombstones(layout).tombstones
            if t.purged_at is None and t.at + window <= now}


def remove_generation_data(layout: StoreLayout, generation: str) -> None:
    """Its Lance tag, lineage and indexes (the manifest stays, as the record of what it was);
    blobs and caches go with the next `remove_unreferenced_state`. Caller holds the lock."""
    delete_generation_tag(layout, generation)
    layout.lineage_dir(generation).remove_tree()
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
    spaces = {read_manifest(layout, g).space_id for g in generations}
    gone = [folder for folder in layout.encoders.subfolders() if folder.name not in spaces]
    for folder in gone:
        folder.remove_tree()
    return len(gone)


def manifest_counts(layout: StoreLayout, generation: str):
    return read_manifest(layout, generation).counts
