"""Lineage queries with DuckDB over a generation's Parquet snapshot.

The tables are read with pyarrow (local or S3 alike) and handed to DuckDB as Arrow: DuckDB's own
S3 reader is an extension it would download at run time.
"""
from __future__ import annotations

import json

import duckdb

from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import LINEAGE_TABLES, has_lineage, read_lineage_table


def _connect(layout: StoreLayout, generation: str) -> duckdb.DuckDBPyConnection:
    if not has_lineage(layout, generation):
        raise KeyError(f"generation {generation} has no lineage snapshot at {layout.lineage_dir(generation)}")
    con = duckdb.connect()
    for name in LINEAGE_TABLES:
        con.register(name, read_lineage_table(layout, generation, name))
    return con


def _rows(cur: duckdb.DuckDBPyConnection) -> list[dict]:
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]


def document_lineage(layout: StoreLayout, generation: str, doc_id: str) -> dict:
    """Source, every revision (current and superseded), pages and chunks of the current one."""
    con = _connect(layout, generation)
    source = _rows(con.execute("SELECT * FROM sources WHERE doc_id = ?", [doc_id]))
    if not source:
        raise KeyError(f"no document {doc_id!r} in generation {generation}")
    src = source[0]
    revisions = _rows(con.execute(
        "SELECT revision_id, digest, media_type, size, uri, date, acquired_at, is_current, "
        "valid_from, valid_to, arrived_at "
        "FROM revisions WHERE source_id = ? ORDER BY acquired_at", [src["source_id"]]))
    pages = _rows(con.execute(
        "SELECT page_no, parser, parser_version, ocr_confidence, width, height, dpi, rotation, "
        "n_elements, empty_reason, length(raw_text) AS raw_chars FROM pages "
        "WHERE revision_id = ? ORDER BY page_no", [src["current_revision_id"]]))
    chunks = _rows(con.execute(
        "SELECT c.chunk_id, c.ordinal, c.page_start, c.page_end, c.spans_json, c.char_start, "
        "c.char_end, c.n_tokens, c.text, v.vector_digest FROM chunks c "
        "LEFT JOIN vectors v USING (chunk_id) WHERE c.revision_id = ? ORDER BY c.ordinal",
        [src["current_revision_id"]]))
    for c in chunks:
        spans = json.loads(c.pop("spans_json"))
        c["page"] = c["page_start"]
        c["bbox"] = next((s["bbox"] for s in spans if s["bbox"]), None)
        c["spans"] = spans
    for r in revisions:
        for key in ("acquired_at", "valid_from", "valid_to", "arrived_at"):
            r[key] = str(r[key]) if r[key] is not None else None
        r["blob"] = str(layout.blob_path(r["digest"]))
    return {"generation": generation, "source": src, "revisions": revisions, "pages": pages,
            "chunks": chunks}


def chunk_join_report(layout: StoreLayout, generation: str) -> dict:
    """How many chunks join chunk → revision → source (all of them, in a sound generation)."""
    con = _connect(layout, generation)
    row = con.execute(
        "SELECT count(*) AS chunks, count(r.revision_id) AS with_revision, count(s.source_id) AS with_source "
        "FROM chunks c LEFT JOIN revisions r ON c.revision_id = r.revision_id "
        "LEFT JOIN sources s ON r.source_id = s.source_id").fetchone()
    return {"chunks": row[0], "with_revision": row[1], "with_source": row[2]}
