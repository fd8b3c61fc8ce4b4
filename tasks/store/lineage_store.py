"""Parquet lineage snapshots: one folder per generation, one file per lineage table."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from schemas.generation import DiffSummary, SourceDiff
from schemas.lineage import (CHUNK_SCHEMA, ELEMENT_SCHEMA, PAGE_SCHEMA, REVISION_SCHEMA, SOURCE_SCHEMA,
                             VECTOR_LINEAGE_SCHEMA, conform)
from tasks.store.layout import StoreLayout

LINEAGE_TABLES = ("sources", "revisions", "pages", "elements", "chunks", "vectors")
LINEAGE_SCHEMAS = dict(zip(LINEAGE_TABLES, (SOURCE_SCHEMA, REVISION_SCHEMA, PAGE_SCHEMA, ELEMENT_SCHEMA,
                                            CHUNK_SCHEMA, VECTOR_LINEAGE_SCHEMA)))


def write_lineage_snapshot(layout: StoreLayout, generation: str, tables: dict[str, pa.Table]) -> str:
    folder = layout.lineage_dir(generation)
    for name in LINEAGE_TABLES:
        (folder / f"{name}.parquet").write_parquet(tables[name])
    return str(folder)


def read_lineage_table(layout: StoreLayout, generation: str, name: str,
                       columns: list[str] | None = None) -> pa.Table:
    """One lineage table in today's shape: columns added since the snapshot was written read as nulls."""
    if name not in LINEAGE_TABLES:
        raise KeyError(name)
    location = layout.lineage_dir(generation) / f"{name}.parquet"
    schema = LINEAGE_SCHEMAS[name]
    if columns is None:
        return conform(location.read_parquet(), schema)
    stored = set(pq.read_schema(location.path, filesystem=location.fs).names)
    table = location.read_parquet([c for c in columns if c in stored])
    wanted = pa.schema([schema.field(c) for c in columns if c not in stored and c in schema.names])
    return conform(table, wanted).select([c for c in columns if c in stored or c in schema.names])


def read_revision_rows(layout: StoreLayout, generation: str, name: str, revision_id: str,
                       columns: list[str] | None = None) -> pa.Table:
    """The rows of one lineage table that belong to one revision (pages, elements, chunks)."""
    if name not in LINEAGE_TABLES:
        raise KeyError(name)
    return (layout.lineage_dir(generation) / f"{name}.parquet").read_parquet(
        columns, filters=[("revision_id", "=", revision_id)])


def without(table: pa.Table, column: str, values: set[str]) -> pa.Table:
    """`table` less the rows whose `column` is one of `values`."""
    if not values or table.num_rows == 0:
        return table
    return table.filter(pc.invert(pc.is_in(table[column], value_set=pa.array(sorted(values), pa.string()))))


@dataclass
class RemovedLineage:
    """What a purge took out of one generation's snapshot: the ids other stores are cleaned of
    (caches by revision, blobs by digest, query records by document, chunk and text)."""

    source_ids: set[str] = field(default_factory=set)
    revision_ids: set[str] = field(default_factory=set)
    digests: set[str] = field(default_factory=set)
    chunk_ids: set[str] = field(default_factory=set)
    texts: list[str] = field(default_factory=list)


def remove_documents(layout: StoreLayout, generation: str, doc_ids: set[str]) -> RemovedLineage | None:
    """Rewrite a generation's snapshot without these documents: their sources and revisions,
    the revisions' pages, elements and chunks, the chunks' vectors, and their rows of the
    source diff. None (nothing rewritten) when the generation holds none of them."""
    tables = {name: read_lineage_table(layout, generation, name) for name in LINEAGE_TABLES}
    sources = tables["sources"]
    hit = pc.is_in(sources["doc_id"], value_set=pa.array(sorted(doc_ids), pa.string()))
    source_ids = set(sources.filter(hit)["source_id"].to_pylist())
    if not source_ids:
        return None
    revs = tables["revisions"].filter(pc.is_in(tables["revisions"]["source_id"],
                                               value_set=pa.array(sorted(source_ids), pa.string())))
    rev_ids = set(revs["revision_id"].to_pylist())
    doomed = tables["chunks"].filter(pc.is_in(tables["chunks"]["revision_id"],
                                              value_set=pa.array(sorted(rev_ids), pa.string())))
    removed = RemovedLineage(source_ids=source_ids, revision_ids=rev_ids,
                             digests=set(revs["digest"].to_pylist()),
                             chunk_ids=set(doomed["chunk_id"].to_pylist()), texts=doomed["text"].to_pylist())
    rewritten = {
        "sources": without(sources, "source_id", source_ids),
        "revisions": without(tables["revisions"], "source_id", source_ids),
        "pages": without(tables["pages"], "revision_id", rev_ids),
        "elements": without(tables["elements"], "revision_id", rev_ids),
        "chunks": without(tables["chunks"], "revision_id", rev_ids),
        "vectors": without(tables["vectors"], "chunk_id", removed.chunk_ids),
    }
    write_lineage_snapshot(layout, generation, rewritten)
    drop_from_source_diff(layout, generation, source_ids)
    return removed


def remove_lineage(layout: StoreLayout, generation: str) -> None:
    """A retired generation's whole snapshot (its manifest stays, as the record of what it was)."""
    layout.lineage_dir(generation).remove_tree()


def has_lineage(layout: StoreLayout, generation: str) -> bool:
    """A snapshot is whole once its last table is written (they are written in order)."""
    return (layout.lineage_dir(generation) / f"{LINEAGE_TABLES[-1]}.parquet").exists()


def lineage_generations(layout: StoreLayout) -> list[str]:
    return [loc.name for loc in layout.lineage_root.subfolders()]


DIFF_FILE = "source_diff.parquet"  # beside the lineage: the manifest keeps counts and a digest
CHANGES = ("added", "changed", "removed", "unchanged")


def write_source_diff(layout: StoreLayout, generation: str, diff: SourceDiff) -> DiffSummary:
    """One row per source (change, source_id), sorted; returns what the manifest records."""
    rows = sorted((change, sid) for change in CHANGES for sid in getattr(diff, change))
    table = pa.table({"change": pa.array([r[0] for r in rows], pa.string()),
                      "source_id": pa.array([r[1] for r in rows], pa.string())})
    (layout.lineage_dir(generation) / DIFF_FILE).write_parquet(table)
    h = hashlib.sha256()
    for change, sid in rows:
        h.update(f"{change}\t{sid}\n".encode())
    return DiffSummary(**{c: len(getattr(diff, c)) for c in CHANGES}, digest=h.hexdigest()[:16])


def read_source_diff(layout: StoreLayout, generation: str) -> SourceDiff:
    location = layout.lineage_dir(generation) / DIFF_FILE
    if not location.exists():
        return SourceDiff()
    table = location.read_parquet()
    out = {c: [] for c in CHANGES}
    for change, sid in zip(table["change"].to_pylist(), table["source_id"].to_pylist()):
        out[change].append(sid)
    return SourceDiff(**out)


def drop_from_source_diff(layout: StoreLayout, generation: str, source_ids: set[str]) -> None:
    """Purge: the diff must not keep the ids of physically removed sources either."""
    location = layout.lineage_dir(generation) / DIFF_FILE
    if not location.exists() or not source_ids:
        return
    table = location.read_parquet()
    hit = pc.is_in(table["source_id"], value_set=pa.array(sorted(source_ids), pa.string()))
    location.write_parquet(table.filter(pc.invert(hit)))
