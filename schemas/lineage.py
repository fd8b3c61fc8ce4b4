"""Lineage contracts: source → revision → page → element → chunk → vector.

Pydantic models are the typed edges between stages; the Arrow schemas are how the same
records are stored (Parquet lineage, LanceDB). Columns stay columnar from warehouse to scorer.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, Field

BBox = tuple[float, float, float, float]  # x0, y0, x1, y1 in page points (PDF) or pixels (images)

# Media type of one record of a JSONL export; its bytes are the canonical JSON of the record.
RECORD_MEDIA_TYPE = "application/vnd.mabillon.record+json"


class SourceInput(BaseModel):
    """One thing to ingest, as named by the caller, before its bytes are stored."""

    source_id: str
    uri: str
    doc_id: str
    corpus: str
    date: str | None = None
    title: str | None = None
    tenant: str
    groups: list[str]
    metadata: dict[str, Any] = Field(default_factory=dict)
    declared_media_type: str | None = None
    # When the document may be shown (schemas.validity); None: an open bound.
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    # When the input reached the drop folder (its file or export time): freshness is measured from it.
    arrived_at: datetime | None = None


class Revision(BaseModel):
    """Content-addressed bytes of a source at one moment; same bytes → same revision."""

    revision_id: str
    source_id: str
    doc_id: str
    uri: str
    corpus: str
    date: str | None
    title: str | None
    tenant: str
    groups: list[str]
    digest: str  # sha256 of the bytes
    size: int
    media_type: str
    acquired_at: datetime
    metadata_json: str = "{}"
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    arrived_at: datetime | None = None


class Element(BaseModel):
    """A block of text on a page (a paragraph, an OCR line, an ALTO TextBlock)."""

    kind: str = "paragraph"
    char_start: int  # offsets into the page's raw text
    char_end: int
    bbox: BBox | None = None
    confidence: float | None = None


class ParsedPage(BaseModel):
    page_no: int  # 1-based
    raw_text: str
    normalized_text: str
    parser: str
    parser_version: str
    ocr_confidence: float | None = None
    width: float | None = None
    height: float | None = None
    dpi: int | None = None
    rotation: float | None = None
    elements: list[Element] = Field(default_factory=list)
    empty_reason: str | None = None


class ParsedDocument(BaseModel):
    revision_id: str
    pages: list[ParsedPage]


class ChunkSpan(BaseModel):
    page_no: int
    bbox: BBox | None = None


class Chunk(BaseModel):
    chunk_id: str
    revision_id: str
    doc_id: str
    ordinal: int
    text: str
    n_tokens: int
    char_start: int  # into the document's raw text (pages joined with "\n\n")
    char_end: int
    page_start: int
    page_end: int
    spans: list[ChunkSpan] = Field(default_factory=list)
    segmenter: str


# ---- Arrow schemas (Parquet lineage and LanceDB) -------------------------------------------

SOURCE_SCHEMA = pa.schema([
    ("source_id", pa.string()), ("doc_id", pa.string()), ("uri", pa.string()),
    ("corpus", pa.string()), ("tenant", pa.string()), ("groups", pa.list_(pa.string())),
    ("current_revision_id", pa.string()), ("first_generation", pa.string()),
])

REVISION_SCHEMA = pa.schema([
    ("revision_id", pa.string()), ("source_id", pa.string()), ("doc_id", pa.string()),
    ("uri", pa.string()), ("corpus", pa.string()), ("date", pa.string()), ("title", pa.string()),
    ("tenant", pa.string()), ("groups", pa.list_(pa.string())), ("digest", pa.string()),
    ("size", pa.int64()), ("media_type", pa.string()),
    ("acquired_at", pa.timestamp("us", tz="UTC")), ("metadata_json", pa.string()),
    ("is_current", pa.bool_()),
    ("valid_from", pa.timestamp("us", tz="UTC")), ("valid_to", pa.timestamp("us", tz="UTC")),
    ("arrived_at", pa.timestamp("us", tz="UTC")),
])

PAGE_SCHEMA = pa.schema([
    ("page_id", pa.string()), ("revision_id", pa.string()), ("page_no", pa.int32()),
    ("parser", pa.string()), ("parser_version", pa.string()),
    ("ocr_confidence", pa.float64()), ("width", pa.float64()), ("height", pa.float64()),
    ("dpi", pa.int32()), ("rotation", pa.float64()), ("raw_text", pa.string()),
    ("normalized_text", pa.string()), ("n_elements", pa.int32()), ("empty_reason", pa.string()),
])

ELEMENT_SCHEMA = pa.schema([
    ("element_id", pa.string()), ("page_id", pa.string()), ("revision_id", pa.string()),
    ("ordinal", pa.int32()), ("kind", pa.string()), ("char_start", pa.int64()),
    ("char_end", pa.int64()), ("bbox", pa.list_(pa.float64())), ("confidence", pa.float64()),
])

CHUNK_SCHEMA = pa.schema([
    ("chunk_id", pa.string()), ("revision_id", pa.string()), ("source_id", pa.string()),
    ("doc_id", pa.string()), ("corpus", pa.string()), ("date", pa.string()),
    ("tenant", pa.string()), ("groups", pa.list_(pa.string())), ("ordinal", pa.int32()),
    ("text", pa.string()), ("n_tokens", pa.int32()), ("char_start", pa.int64()),
    ("char_end", pa.int64()), ("page_start", pa.int32()), ("page_end", pa.int32()),
    ("spans_json", pa.string()), ("segmenter", pa.string()),
    # The validity interval of the chunk's document (null: open); the query time must be inside it.
    ("valid_from", pa.timestamp("us", tz="UTC")), ("valid_to", pa.timestamp("us", tz="UTC")),
])

VECTOR_LINEAGE_SCHEMA = pa.schema([
    ("chunk_id", pa.string()), ("space_id", pa.string()), ("vector_digest", pa.string()),
    ("norm", pa.float32()),
])


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with every nullable column of `schema` it lacks, as nulls, in schema order.

    Generations published before a column existed keep their files; reading them through this
    gives today's shape (an absent validity bound is an open one)."""
    missing = [f for f in schema if f.name not in table.schema.names]
    if not missing:
        return table
    for f in missing:
        if not f.nullable:
            raise ValueError(f"stored table lacks required column {f.name!r}")
        table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    names = [f.name for f in schema] + [n for n in table.schema.names if n not in schema.names]
    return table.select(names)


def chunk_table_schema(dim: int) -> pa.Schema:
    """The served LanceDB table: chunk columns plus the vector of the embedding space."""
    return CHUNK_SCHEMA.append(pa.field("vector", pa.list_(pa.float32(), dim)))


def spans_to_json(spans: list[ChunkSpan]) -> str:
    return json.dumps([s.model_dump() for s in spans], separators=(",", ":"))
