"""DOCX through docling: headings, paragraphs, lists and tables; macros never run (docx has none,
and a macro-enabled file is refused at inspection)."""
from __future__ import annotations

import functools

from schemas.lineage import ParsedDocument, Revision
from schemas.settings import ParseSettings
from tasks.ingest.parse.docling_text import convert_page


@functools.cache
def _converter():
    # docling is imported on first use: it takes seconds, and most commands never parse DOCX.
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import DocumentConverter

    return DocumentConverter(allowed_formats=[InputFormat.DOCX])


def parse_docx(data: bytes, revision: Revision, settings: ParseSettings) -> ParsedDocument:
    return ParsedDocument(revision_id=revision.revision_id, pages=[convert_page(_converter(), data, "docx")])
