"""HTML through docling, with every fetch disabled: scripts, stylesheets and images that the
page references on other hosts (or on this disk) are never requested; scripts never run."""
from __future__ import annotations

import functools
import io

from schemas.lineage import ParsedDocument, Revision
from schemas.settings import MabillonSettings
from tasks.ingest.parse.docling_text import document_page
from tasks.ingest.parse.errors import ParseRefused


@functools.cache
def _converter():
    from docling.datamodel.backend_options import HTMLBackendOptions
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import DocumentConverter, HTMLFormatOption

    offline = HTMLBackendOptions(fetch_images=False, enable_remote_fetch=False,
                                 enable_local_fetch=False, render_page=False,
                                 add_title=False)  # <title> would repeat the <h1>; the title is metadata
    return DocumentConverter(allowed_formats=[InputFormat.HTML],
                             format_options={InputFormat.HTML: HTMLFormatOption(backend_options=offline)})


def parse_html(data: bytes, revision: Revision, settings: MabillonSettings) -> ParsedDocument:
    from docling.datamodel.base_models import ConversionStatus, DocumentStream

    try:
        result = _converter().convert(DocumentStream(name="input.html", stream=io.BytesIO(data)),
                                      raises_on_error=False)
    except Exception as exc:  # docling wraps backend failures in several exception types
        raise ParseRefused(f"malformed HTML: {exc}") from None
    if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
        raise ParseRefused(f"malformed HTML: docling conversion {result.status.value}")
    return ParsedDocument(revision_id=revision.revision_id,
                          pages=[document_page(result.document, "docling-html")])
