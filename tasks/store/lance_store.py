"""LanceDB: each generation is one version of the chunks table, tagged with its id.

Serving reads check out the tag, so versions written by an unfinished run are never seen.
"""
from __future__ import annotations

import lancedb
import pyarrow as pa

from tasks.store.layout import CHUNKS_TABLE, StoreLayout


def connect(layout: StoreLayout) -> lancedb.DBConnection:
    layout.lance.mkdir(parents=True, exist_ok=True)
    return lancedb.connect(str(layout.lance))


def write_generation_table(layout: StoreLayout, generation: str, table: pa.Table) -> int:
    """Write the full chunk table of a generation as a new version and tag it."""
    db = connect(layout)
    lt = db.create_table(CHUNKS_TABLE, table, mode="overwrite")
    version = lt.version
    tags = lt.tags.list()
    if generation in tags:  # left by a run killed after tagging; that version was never served
        lt.tags.delete(generation)
    lt.tags.create(generation, version)
    return version


def open_generation_table(layout: StoreLayout, generation: str):
    db = connect(layout)
    lt = db.open_table(CHUNKS_TABLE)
    lt.checkout(generation)
    return lt


def tagged_generations(layout: StoreLayout) -> list[str]:
    db = connect(layout)
    if CHUNKS_TABLE not in db.list_tables().tables:
        return []
    return list(db.open_table(CHUNKS_TABLE).tags.list())
