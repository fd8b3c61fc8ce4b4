"""schemas/arrow.py: Arrow schemas derived from pydantic row models."""
from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pytest
from pydantic import BaseModel

from schemas.arrow import Float32, Int32, arrow_schema
from schemas.lineage import (CHUNK_SCHEMA, ELEMENT_SCHEMA, PAGE_SCHEMA, REVISION_SCHEMA,
                             SOURCE_SCHEMA, VECTOR_LINEAGE_SCHEMA, Revision, RevisionRow,
                             chunk_table_schema)

TS = pa.timestamp("us", tz="UTC")

# The lineage schemas as they were written by hand before being derived (issue 35): the files
# and LanceDB tables already published carry exactly these, so the derived ones must equal them.
WRITTEN = {
    "sources": pa.schema([
        ("source_id", pa.string()), ("doc_id", pa.string()), ("uri", pa.string()),
        ("corpus", pa.string()), ("tenant", pa.string()), ("groups", pa.list_(pa.string())),
        ("current_revision_id", pa.string()), ("first_generation", pa.string()),
    ]),
    "revisions": pa.schema([
        ("revision_id", pa.string()), ("source_id", pa.string()), ("doc_id", pa.string()),
        ("uri", pa.string()), ("corpus", pa.string()), ("date", pa.string()), ("title", pa.string()),
        ("tenant", pa.string()), ("groups", pa.list_(pa.string())), ("digest", pa.string()),
        ("size", pa.int64()), ("media_type", pa.string()),
        ("acquired_at", TS), ("metadata_json", pa.string()), ("is_current", pa.bool_()),
        ("valid_from", TS), ("valid_to", TS), ("arrived_at", TS),
    ]),
    "pages": pa.schema([
        ("page_id", pa.string()), ("revision_id", pa.string()), ("page_no", pa.int32()),
        ("parser", pa.string()), ("parser_version", pa.string()),
        ("ocr_confidence", pa.float64()), ("width", pa.float64()), ("height", pa.float64()),
        ("dpi", pa.int32()), ("rotation", pa.float64()), ("raw_text", pa.string()),
        ("normalized_text", pa.string()), ("n_elements", pa.int32()), ("empty_reason", pa.string()),
    ]),
    "elements": pa.schema([
        ("element_id", pa.string()), ("page_id", pa.string()), ("revision_id", pa.string()),
        ("ordinal", pa.int32()), ("kind", pa.string()), ("char_start", pa.int64()),
        ("char_end", pa.int64()), ("bbox", pa.list_(pa.float64())), ("confidence", pa.float64()),
    ]),
    "chunks": pa.schema([
        ("chunk_id", pa.string()), ("revision_id", pa.string()), ("source_id", pa.string()),
        ("doc_id", pa.string()), ("corpus", pa.string()), ("date", pa.string()),
        ("tenant", pa.string()), ("groups", pa.list_(pa.string())), ("ordinal", pa.int32()),
        ("text", pa.string()), ("n_tokens", pa.int32()), ("char_start", pa.int64()),
        ("char_end", pa.int64()), ("page_start", pa.int32()), ("page_end", pa.int32()),
        ("spans_json", pa.string()), ("segmenter", pa.string()),
        ("valid_from", TS), ("valid_to", TS),
        # the document's OCR quality (issue 33); older generations lack them and read as nulls
        ("ocr_quality", pa.float32()), ("ocr_quality_source", pa.string()),
    ]),
    "vectors": pa.schema([
        ("chunk_id", pa.string()), ("space_id", pa.string()), ("vector_digest", pa.string()),
        ("norm", pa.float32()),
    ]),
}
DERIVED = {"sources": SOURCE_SCHEMA, "revisions": REVISION_SCHEMA, "pages": PAGE_SCHEMA,
           "elements": ELEMENT_SCHEMA, "chunks": CHUNK_SCHEMA, "vectors": VECTOR_LINEAGE_SCHEMA}


@pytest.mark.parametrize("table", sorted(WRITTEN))
def test_derived_lineage_schema_equals_the_one_on_disk(table):
    derived = DERIVED[table]
    assert derived.equals(WRITTEN[table], check_metadata=True), f"{derived}\n!=\n{WRITTEN[table]}"
    assert [f.nullable for f in derived] == [f.nullable for f in WRITTEN[table]]


def test_served_table_is_the_chunk_row_plus_the_vector():
    schema = chunk_table_schema(8)
    assert schema.names == [*WRITTEN["chunks"].names, "vector"]
    assert schema.field("vector").type == pa.list_(pa.float32(), 8)


def test_revision_keeps_its_field_order_and_the_row_adds_only_the_current_flag():
    assert list(Revision.model_fields)[-4:] == ["metadata_json", "valid_from", "valid_to", "arrived_at"]
    assert set(RevisionRow.model_fields) - set(Revision.model_fields) == {"is_current"}


class Inner(BaseModel):
    x: float
    tags: list[str] = []


class Row(BaseModel):
    name: str
    count: int
    small: Int32
    maybe_small: Int32 | None = None
    ratio: Float32
    flag: bool
    at: datetime | None
    box: tuple[float, float, float, float] | None = None
    inner: Inner
    inners: list[Inner] = []


def test_types_nullability_lists_and_nested_models():
    schema = arrow_schema(Row)
    inner = pa.struct([pa.field("x", pa.float64(), nullable=False),
                       pa.field("tags", pa.list_(pa.string()), nullable=False)])
    expected = pa.schema([
        pa.field("name", pa.string(), nullable=False),
        pa.field("count", pa.int64(), nullable=False),
        pa.field("small", pa.int32(), nullable=False),
        pa.field("maybe_small", pa.int32(), nullable=True),
        pa.field("ratio", pa.float32(), nullable=False),
        pa.field("flag", pa.bool_(), nullable=False),
        pa.field("at", TS, nullable=True),
        pa.field("box", pa.list_(pa.float64()), nullable=True),
        pa.field("inner", inner, nullable=False),
        pa.field("inners", pa.list_(inner), nullable=False),
    ])
    assert schema.equals(expected), f"{schema}\n!=\n{expected}"
    assert all(f.nullable for f in arrow_schema(Row, all_nullable=True))


def test_rows_of_the_model_fill_the_derived_schema():
    row = Row(name="a", count=1, small=2, ratio=0.5, flag=True, at=None, inner=Inner(x=1.0))
    table = pa.Table.from_pylist([row.model_dump()], schema=arrow_schema(Row))
    assert table.to_pylist()[0]["inner"] == {"x": 1.0, "tags": []}


@pytest.mark.parametrize("annotation", [dict[str, int], int | str, tuple[int, str], bytes])
def test_a_type_without_an_arrow_form_is_refused(annotation):
    class Bad(BaseModel):
        field: annotation  # type: ignore[valid-type]

    with pytest.raises(TypeError, match="no Arrow type"):
        arrow_schema(Bad)
