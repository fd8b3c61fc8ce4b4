"""Query records read back by id: one JSON document each under the manifests' queries folder.

An id is looked up only when it has the shape `new_query_id` gives (letters, digits, `-`, `_`),
so no id, however written, names a file outside that folder.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from pydantic import ValidationError

from schemas.query import QueryRecord
from tasks.store.layout import StoreLayout

QUERY_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,127}$")


def read_query_record(layout: StoreLayout, query_id: str) -> QueryRecord | None:
    """The record, or None when the id is malformed, absent or its file is not a record."""
    if not QUERY_ID.match(query_id):
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
