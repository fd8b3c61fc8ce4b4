"""Parquet lineage snapshots: one folder per generation, one file per lineage table."""
from __future__ import annotations

import pyarrow as pa

from tasks.store.layout import StoreLayout

LINEAGE_TABLES = ("sources", "revisions", "pages", "elements", "chunks", "vectors")


def write_lineage_snapshot(layout: StoreLayout, generation: str, tables: dict[str, pa.Table]) -> str:
    folder = layout.lineage_dir(generation)
    for name in LINEAGE_TABLES:
        (folder / f"{name}.parquet").write_parquet(tables[name])
    return str(folder)


def read_lineage_table(layout: StoreLayout, generation: str, name: str,
                       columns: list[str] | None = None) -> pa.Table:
    if name not in LINEAGE_TABLES:
        raise KeyError(name)
    return (layout.lineage_dir(generation) / f"{name}.parquet").read_parquet(columns)


def read_revision_rows(layout: StoreLayout, generation: str, name: str, revision_id: str,
                       columns: list[str] | None = None) -> pa.Table:
    """The rows of one lineage table that belong to one revision (pages, elements, chunks)."""
    if name not in LINEAGE_TABLES:
        raise KeyError(name)
    return (layout.lineage_dir(generation) / f"{name}.parquet").read_parquet(
        columns, filters=[("revision_id", "=", revision_id)])


def has_lineage(layout: StoreLayout, generation: str) -> bool:
    """A snapshot is whole once its last table is written (they are written in order)."""
    return (layout.lineage_dir(generation) / f"{LINEAGE_TABLES[-1]}.parquet").exists()


def lineage_generations(layout: StoreLayout) -> list[str]:
    return [loc.name for loc in layout.lineage_root.subfolders()]
