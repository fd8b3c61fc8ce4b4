"""The query record: one JSON document per answered question under the manifests root, so a
run can be read with `jq`, audited, and replayed (tasks.llm.replay.ReplayProvider.from_record)."""
from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timezone
from pathlib import Path

from schemas.query import QueryRecord
from tasks.store.atomic import atomic_write_text
from tasks.store.layout import StoreLayout


def new_query_id(question: str) -> str:
    """Sortable by time, and unguessable: an anonymous question is reachable by its link only
    (the reading room lists it to no one), so the id carries 64 random bits."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    digest = hashlib.sha256(question.encode("utf-8", "replace")).hexdigest()[:8]
    return f"{stamp}-{digest}-{secrets.token_hex(8)}"


def write_record(layout: StoreLayout, record: QueryRecord) -> Path:
    path = layout.queries / f"{record.query_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, record.model_dump_json(indent=1))
    return path


def read_record(path: Path) -> QueryRecord:
    return QueryRecord.model_validate_json(Path(path).read_text("utf-8"))
