"""Plain text files: UTF-8, UTF-16/32 with a byte-order mark, Windows-1252 or latin-1 (the
encoding read is recorded in the parser name), one page, paragraphs as elements."""
from __future__ import annotations

import re

from schemas.lineage import Element, ParsedDocument, ParsedPage, Revision
from schemas.settings import ParseSettings
from tasks.ingest.parse.normalize import normalize_text

PARSER_VERSION = "plaintext-1"
_PARAGRAPH = re.compile(r"\S(?:.*?\S)?(?=\n\s*\n|\s*\Z)", re.S)


_BOMS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
         (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def decode_text(data: bytes) -> tuple[str, str]:
    """The text and the encoding it was read in: a byte-order mark decides; otherwise UTF-8,
    then Windows-1252 (what French office files are, with € ’ « » in 0x80–0x9F), then latin-1,
    which reads any bytes."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding), encoding
            except UnicodeDecodeError:
                break
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding), encoding.removesuffix("-sig")
        except UnicodeDecodeError:
            continue
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
