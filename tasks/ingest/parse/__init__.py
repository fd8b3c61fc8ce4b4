"""Parse: revision bytes → pages of raw and normalised text, with elements and their boxes.

Each media type has one parser; adding a format is adding a module and a line in PARSERS.
A parser returns a ParsedDocument or raises ParseRefused (the input is quarantined with the
reason; the batch goes on).
"""
from __future__ import annotations

from collections.abc import Callable

from schemas.lineage import RECORD_MEDIA_TYPE, ParsedDocument, Revision
from schemas.settings import MabillonSettings
from tasks.ingest.parse.alto import parse_alto
from tasks.ingest.parse.docx import parse_docx
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.html import parse_html
from tasks.ingest.parse.image import parse_image
from tasks.ingest.parse.pdf import parse_pdf
from tasks.ingest.parse.plaintext import parse_plaintext
from tasks.ingest.parse.record import parse_record

Parser = Callable[[bytes, Revision, MabillonSettings], ParsedDocument]

PARSERS: dict[str, Parser] = {
    RECORD_MEDIA_TYPE: parse_record,
    "text/plain": parse_plaintext,
    "text/html": parse_html,
    "application/pdf": parse_pdf,
    "image/png": parse_image,
    "image/jpeg": parse_image,
    "image/tiff": parse_image,
    "application/alto+xml": parse_alto,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": parse_docx,
}


def parser_for(media_type: str) -> Parser | None:
    return PARSERS.get(media_type)


def parse_revision(data: bytes, revision: Revision, settings: MabillonSettings) -> ParsedDocument:
    parser = parser_for(revision.media_type)
    if parser is None:
        raise ParseRefused(f"no parser for media type {revision.media_type}")
    return parser(data, revision, settings)
