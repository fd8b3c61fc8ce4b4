"""Records of a JSONL export (one document each): the text as given, one page, no boxes."""
from __future__ import annotations

import json

from schemas.lineage import Element, ParsedDocument, ParsedPage, Revision
from schemas.settings import ParseSettings
from tasks.ingest.parse.normalize import normalize_text

PARSER_VERSION = "record-1"


def parse_record(data: bytes, revision: Revision, settings: ParseSettings) -> ParsedDocument:
    text = json.loads(data)["text"]
    page = ParsedPage(
        page_no=1, raw_text=text, normalized_text=normalize_text(text), parser="record",
        parser_version=PARSER_VERSION,
        elements=[Element(kind="text", char_start=0, char_end=len(text))],
    )
    return ParsedDocument(revision_id=revision.revision_id, pages=[page])
