"""Parquet lineage snapshots: one folder per generation, one file per lineage table."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

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


def has_lineage(layout: StoreLayout, generation: str) -> bool:
    """A snapshot is whole once its last table is written (they are written in order)."""
    return (layout.lineage_dir(generation) / f"{LINEAGE_TABLES[-1]}.parquet").exists()


def lineage_generations(layout: StoreLayout) -> list[str]:
    return [loc.name for loc in layout.lineage_root.subfolders()]
