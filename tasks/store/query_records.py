"""Query records read back by id: one JSON document each under the manifests' queries folder.

An id is looked up only when it has the shape `new_query_id` gives (letters, digits, `-`, `_`),
so no id, however written, names a file outside that folder. Lists of questions come from
`QueryIndex`, which reads each record once, not on every request.
"""
from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import ValidationError

from schemas.query import QueryRecord
from tasks.store.layout import StoreLayout

QUERY_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,127}$")


def read_query_record(layout: StoreLayout, query_id: str) -> QueryRecord | None:
    """The record, or None when the id is malformed, absent or its file is not a record."""
    if not isinstance(query_id, str) or not QUERY_ID.fullmatch(query_id):
        return None
    path = layout.queries / f"{query_id}.json"
    if not path.is_file():
        return None
    try:
        return QueryRecord.model_validate_json(path.read_bytes())
    except (ValidationError, ValueError, OSError):
        return None


def iter_query_records(layout: StoreLayout, newest_first: bool = True) -> Iterator[QueryRecord]:
    """Every readable record (ids sort by time: they start with a UTC timestamp)."""
    if not layout.queries.exists():
        return
    for path in sorted(layout.queries.glob("*.json"), reverse=newest_first):
        record = read_query_record(layout, path.stem)
        if record is not None:
            yield record


@dataclass(frozen=True)
class QueryListing:
    """What a list of questions shows of one record (the record itself is read by id)."""

    query_id: str
    created_at: str
    question: str
    generation: str
    principal_id: str | None
    tenant: str | None


def _listing(record: QueryRecord) -> QueryListing:
    asker = record.principal
    return QueryListing(record.query_id, record.created_at, record.question.question,
                        record.generation, asker.principal_id if asker else None,
                        asker.tenant if asker else None)


class QueryIndex:
    """The listings of every readable record, kept in memory: a request lists from here. The
    folder is listed again only when its modification time changed (a record written or
    rewritten — a redaction — is renamed into it), and only new or changed files are read.

    A folder changed within the last FRESH_NS is listed again on the next call too: a change in
    the same clock tick as a listing would not move its modification time."""

    FRESH_NS = 2_000_000_000

    def __init__(self, layout: StoreLayout):
        self.layout = layout
        self._folder: int | None = None  # the folder's mtime when last listed
        self._files: dict[str, tuple[tuple, QueryListing | None]] = {}  # name → (stamp, listing)
        self._sorted: list[QueryListing] = []
        self._lock = threading.Lock()

    def listings(self) -> list[QueryListing]:
        """Newest first (ids start with a UTC timestamp)."""
        folder = self.layout.queries
        try:
            mtime = folder.stat().st_mtime_ns
        except FileNotFoundError:
            return []
        with self._lock:
            if mtime == self._folder:
                return self._sorted
            files: dict[str, tuple[tuple, QueryListing | None]] = {}
            with os.scandir(folder) as entries:
                for entry in entries:
                    stem = entry.name.removesuffix(".json")
                    if stem == entry.name or not QUERY_ID.fullmatch(stem):
                        continue
                    try:
                        st = entry.stat()
                    except FileNotFoundError:  # removed while listed
                        continue
                    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
                    known = self._files.get(stem)
                    if known is not None and known[0] == stamp:
                        files[stem] = known
                    else:
                        record = read_query_record(self.layout, stem)
                        files[stem] = (stamp, _listing(record) if record else None)
            self._files = files
            self._sorted = [files[k][1] for k in sorted(files, reverse=True) if files[k][1] is not None]
            fresh = time.time_ns() - mtime < self.FRESH_NS
            self._folder = None if fresh else mtime
            return self._sorted
