"""Plain text files: UTF-8 (latin-1 as a recorded fallback), one page, paragraphs as elements."""
from __future__ import annotations

import re

from schemas.lineage import Element, ParsedDocument, ParsedPage, Revision
from schemas.settings import ParseSettings
from tasks.ingest.parse.normalize import normalize_text

PARSER_VERSION = "plaintext-1"
_PARAGRAPH = re.compile(r"\S(?:.*?\S)?(?=\n\s*\n|\s*\Z)", re.S)


def decode_text(data: bytes) -> tuple[str, str]:
    try:
        return data.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def parse_plaintext(data: bytes, revision: Revision, settings: ParseSettings) -> ParsedDocument:
    text, encoding = decode_text(data)
    elements = [Element(kind="paragraph", char_start=m.start(), char_end=m.end())
                for m in _PARAGRAPH.finditer(text)]
    page = ParsedPage(
        page_no=1, raw_text=text, normalized_text=normalize_text(text),
        parser=f"plaintext/{encoding}", parser_version=PARSER_VERSION, elements=elements,
        empty_reason=None if text.strip() else "no text",
    )
    return ParsedDocument(revision_id=revision.revision_id, pages=[page])
