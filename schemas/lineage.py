"""Lineage contracts: source → revision → page → element → chunk → vector.

Pydantic models are the typed edges between stages; the `*Row` models are how records are
stored (Parquet lineage, LanceDB), and their Arrow schemas are derived from them
(schemas.arrow). Columns stay columnar from warehouse to scorer.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, Field

from schemas.arrow import Float32, Int32, arrow_schema

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


class _RevisionFields(BaseModel):
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


class _Currency(BaseModel):
    is_current: bool  # the source's current revision (older ones stay listed, not current)


class _Validity(BaseModel):
    # When the document may be shown (schemas.validity); None: an open bound.
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    # When the input reached the drop folder: freshness is measured from it.
    arrived_at: datetime | None = None


# pydantic lists the fields of several bases from the last base to the first: these read
# "revision fields, then validity" (and, stored, the current flag between them).
class Revision(_Validity, _RevisionFields):
    """Content-addressed bytes of a source at one moment; same bytes → same revision."""


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


# ---- stored rows (Parquet lineage and LanceDB); their Arrow schemas derive from them ----------
# Every stored column is declared nullable (pyarrow's default, which the files published so far
# carry); the row models say what a row must hold.

class SourceRow(BaseModel):
    source_id: str
    doc_id: str
    uri: str
    corpus: str
    tenant: str
    groups: list[str]
    current_revision_id: str
    first_generation: str


class RevisionRow(_Validity, _Currency, _RevisionFields):
    """A revision as stored: the contract plus whether it is its source's current one."""


class PageRow(BaseModel):
    page_id: str
    revision_id: str
    page_no: Int32
    parser: str
    parser_version: str
    ocr_confidence: float | None
    width: float | None
    height: float | None
    dpi: Int32 | None
    rotation: float | None
    raw_text: str
    normalized_text: str
    n_elements: Int32
    empty_reason: str | None


class ElementRow(BaseModel):
    element_id: str
    page_id: str
    revision_id: str
    ordinal: Int32
    kind: str
    char_start: int
    char_end: int
    bbox: list[float] | None
    confidence: float | None


class ChunkRow(BaseModel):
    chunk_id: str
    revision_id: str
    source_id: str
    doc_id: str
    corpus: str
    date: str | None
    tenant: str
    groups: list[str]
    ordinal: Int32
    text: str
    n_tokens: Int32
    char_start: int
    char_end: int
    page_start: Int32
    page_end: Int32
    spans_json: str
    segmenter: str
    # The validity interval of the chunk's document (null: open); the query time must be inside it.
    valid_from: datetime | None
    valid_to: datetime | None
    # The document's OCR quality, 0–1 (tasks/ingest/ocr_quality.py), on each of its chunks so
    # that ranking reads it with the row metadata; its source: delivered | ocr | estimated.
    # Null: unknown (no words, or a generation published before the column).
    ocr_quality: Float32 | None = None
    ocr_quality_source: str | None = None


class VectorLineageRow(BaseModel):
    chunk_id: str
    space_id: str
    vector_digest: str
    norm: Float32


SOURCE_SCHEMA = arrow_schema(SourceRow, all_nullable=True)
REVISION_SCHEMA = arrow_schema(RevisionRow, all_nullable=True)
PAGE_SCHEMA = arrow_schema(PageRow, all_nullable=True)
ELEMENT_SCHEMA = arrow_schema(ElementRow, all_nullable=True)
CHUNK_SCHEMA = arrow_schema(ChunkRow, all_nullable=True)
VECTOR_LINEAGE_SCHEMA = arrow_schema(VectorLineageRow, all_nullable=True)


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
