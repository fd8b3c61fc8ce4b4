"""DOCX through docling: headings, paragraphs, lists and tables; macros never run (docx has none,
and a macro-enabled file is refused at inspection)."""
from __future__ import annotations

import functools
import io

from schemas.lineage import ParsedDocument, Revision
from schemas.settings import MabillonSettings
from tasks.ingest.parse.docling_text import document_page
from tasks.ingest.parse.errors import ParseRefused


@functools.cache
def _converter():
    # docling is imported on first use: it takes seconds, and most commands never parse DOCX.
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import DocumentConverter

    return DocumentConverter(allowed_formats=[InputFormat.DOCX])


def parse_docx(data: bytes, revision: Revision, settings: MabillonSettings) -> ParsedDocument:
    from docling.datamodel.base_models import ConversionStatus, DocumentStream

    try:
        result = _converter().convert(DocumentStream(name="input.docx", stream=io.BytesIO(data)),
                                      raises_on_error=False)
    except Exception as exc:  # docling wraps backend failures in several exception types
        raise ParseRefused(f"malformed DOCX: {exc}") from None
    if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
        raise ParseRefused(f"malformed DOCX: docling conversion {result.status.value}")
    return ParsedDocument(revision_id=revision.revision_id,
                          pages=[document_page(result.document, "docling-docx")])
