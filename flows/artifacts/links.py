"""The one place a document's link is made, for every artifact that cites documents.

Where a reading room runs (`settings.reading_room.url`), a document links to its page there;
otherwise to the lineage artifact of the same run (source → revision → digest → pages → chunks).
"""
from __future__ import annotations

from urllib.parse import quote

from schemas.settings import MabillonSettings


def reading_room_link(settings: MabillonSettings, doc_id: str, generation: str) -> str | None:
    base = settings.reading_room.url
    if not base:
        return None
    return f"{base.rstrip('/')}/documents/{quote(doc_id, safe='')}?generation={quote(generation)}"


def document_link(settings: MabillonSettings, doc_id: str, generation: str,
                  lineage_url: str | None = None) -> tuple[str, str] | None:
    """(label, url) of the link shown for a cited document, or None when there is nowhere to go."""
    room = reading_room_link(settings, doc_id, generation)
    if room:
        return "open in the reading room", room
    if lineage_url:
        return "lineage", lineage_url
    return None
