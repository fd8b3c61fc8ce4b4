"""Refusals remembered: content the parsers refused, so that the same bytes are not parsed (and
OCRed) again on every run only to be refused again.

A quarantined input is not part of any generation, so each run found it new and parsed it again:
a no-text scan of 300 pages was OCRed on every scheduled ingest. Here each lasting refusal is
kept under `caches/refused/<key>/<digest>.json`, where the key digests everything that decides
the outcome besides the bytes (OCR settings, limits, sandbox limits, parser and library
versions; tasks.ingest.parse.refusal_key). Changed bytes have another digest, changed settings
or an upgraded parser another key: either parses again. Removing `caches/refused/` forgets them.
"""
from __future__ import annotations

from datetime import datetime, timezone

from pydantic import BaseModel, ValidationError

from tasks.store.layout import StoreLayout
from tasks.store.location import Location


class RememberedRefusal(BaseModel):
    digest: str
    media_type: str
    reason: str
    at: datetime
    uri: str  # where the bytes were first refused (for the operator reading the folder)


def _location(layout: StoreLayout, key: str, digest: str) -> Location:
    return layout.caches / "refused" / key / f"{digest}.json"


def load_refusal(layout: StoreLayout, key: str, digest: str, media_type: str) -> RememberedRefusal | None:
    location = _location(layout, key, digest)
    if not location.exists():
        return None
    try:
        found = RememberedRefusal.model_validate_json(location.read_bytes())
    except (ValidationError, ValueError):  # a torn or foreign file: parse again, it is rewritten
        return None
    return found if found.media_type == media_type and found.digest == digest else None


def save_refusal(layout: StoreLayout, key: str, digest: str, media_type: str, reason: str,
                 uri: str) -> None:
    record = RememberedRefusal(digest=digest, media_type=media_type, reason=reason,
                               at=datetime.now(timezone.utc), uri=uri)
    _location(layout, key, digest).write_text(record.model_dump_json())
