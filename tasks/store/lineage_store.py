"""Parquet lineage snapshots: one folder per generation, one file per lineage table."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.store.atomic import atomic_write_parquet
from tasks.store.layout import StoreLayout

LINEAGE_TABLES = ("sources", "revisions", "pages", "elements", "chunks", "vectors")


def write_lineage_snapshot(layout: StoreLayout, generation: str, tables: dict[str, pa.Table]) -> str:
    folder = layout.lineage_dir(generation)
    for name in LINEAGE_TABLES:
        atomic_write_parquet(folder / f"{name}.parquet", tables[name])
    return str(folder)


def read_lineage_table(layout: StoreLayout, generation: str, name: str,
                       columns: list[str] | None = None) -> pa.Table:
    if name not in LINEAGE_TABLES:
        raise KeyError(name)
    return pq.read_table(layout.lineage_dir(generation) / f"{name}.parquet", columns=columns)


def lineage_generations(layout: StoreLayout) -> list[str]:
    if not layout.lineage_root.exists():
        return []
    return [p.name for p in layout.lineage_root.iterdir() if p.is_dir()]
