"""LanceDB: each generation is one version of the chunks table, tagged with its id.

Serving reads check out the tag, so versions written by an unfinished run are never seen.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

import pyarrow as pa

from tasks.store.lance_rest_client import defer_rest_client
from tasks.store.layout import CHUNKS_TABLE, StoreLayout

defer_rest_client()  # before lancedb: its REST client's API modules load only if used
import lancedb  # noqa: E402


def connect(layout: StoreLayout, session: lancedb.Session | None = None) -> lancedb.DBConnection:
    layout.lance.mkdir()
    return lancedb.connect(layout.lance.uri, storage_options=layout.lance.options or None,
                           session=session)


_SESSIONS: dict[int, lancedb.Session] = {}
_SESSIONS_LOCK = threading.Lock()


def serving_session(index_cache_mb: int) -> lancedb.Session:
    """The process's LanceDB session for queries: one index cache (IVF centroids, SQ codes,
    scalar indexes as they are read) shared by every retriever and bounded in bytes. Without
    it each opened table gets a session of its own with LanceDB's default cache (GiBs), so a
    process serving many principals held one copy of the index per principal."""
    with _SESSIONS_LOCK:  # retrievers open in several threads at once (a served process)
        if index_cache_mb not in _SESSIONS:
            _SESSIONS[index_cache_mb] = lancedb.Session(index_cache_size_bytes=index_cache_mb << 20)
        return _SESSIONS[index_cache_mb]


Prepare = Callable[[object], None]  # builds indexes on a fresh version before it is tagged


def write_generation_table(layout: StoreLayout, generation: str, table: pa.Table,
                           prepare: Prepare | None = None) -> int:
    """Write the full chunk table of a generation as a new version, let `prepare` index it
    (each index is one more version), and tag the last one: the tag names the data with its
    indexes, so rollback serves a generation with its own."""
    db = connect(layout)
    lt = db.create_table(CHUNKS_TABLE, table, mode="overwrite")
    if prepare is not None:
        prepare(lt)
    version = lt.version
    tags = lt.tags.list()
    if generation in tags:  # left by a run killed after tagging; that version was never served
        lt.tags.delete(generation)
    lt.tags.create(generation, version)
    return version


def open_generation_table(layout: StoreLayout, generation: str,
                          session: lancedb.Session | None = None):
    db = connect(layout, session)
    lt = db.open_table(CHUNKS_TABLE)
    lt.checkout(generation)
    return lt


def tagged_generations(layout: StoreLayout) -> list[str]:
    db = connect(layout)
    if CHUNKS_TABLE not in db.list_tables().tables:
        return []
    return list(db.open_table(CHUNKS_TABLE).tags.list())


def rewrite_generation_table(layout: StoreLayout, generation: str, keep,
                             prepare: Callable[[object, pa.Table], None] | None = None) -> tuple[int, int]:
    """Rewrite a generation's rows through `keep(table) -> table`, index the result again with
    `prepare(lance_table, rows)`, and move the generation's tag to it.

    Returns (rows before, rows after). The old version (and its indexes) is only unreferenced
    afterwards; `prune_untagged_versions` removes it from disk.
    """
    db = connect(layout)
    lt = db.open_table(CHUNKS_TABLE)
    lt.checkout(generation)
    before = lt.to_arrow()
    after = keep(before)
    if after.num_rows == before.num_rows:
        return before.num_rows, after.num_rows
    new = db.create_table(CHUNKS_TABLE, after, mode="overwrite")
    if prepare is not None:
        prepare(new, after)
    new.tags.update(generation, new.version)
    return before.num_rows, after.num_rows


def delete_generation_tag(layout: StoreLayout, generation: str) -> None:
    db = connect(layout)
    lt = db.open_table(CHUNKS_TABLE)
    if generation in lt.tags.list():
        lt.tags.delete(generation)


def prune_untagged_versions(layout: StoreLayout) -> dict:
    """Physically remove every version no generation tag points to (except the latest).

    LanceDB's own cleanup refuses while tagged versions are older than the cutoff; Lance's
    dataset API can skip them instead, which is what retention needs.
    """
    from datetime import timedelta

    import lance

    location = layout.lance / f"{CHUNKS_TABLE}.lance"
    if not location.exists():
        return {}
    dataset = lance.dataset(location.uri, storage_options=location.options or None)
    stats = dataset.cleanup_old_versions(
        older_than=timedelta(0), delete_unverified=True, error_if_tagged_old_versions=False)
    return {"bytes_removed": stats.bytes_removed, "old_versions": stats.old_versions}
