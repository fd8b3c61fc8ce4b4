"""HTML through docling, with every fetch disabled: scripts, stylesheets and images that the
page references on other hosts (or on this disk) are never requested; scripts never run."""
from __future__ import annotations

import functools

from schemas.lineage import ParsedDocument, Revision
from schemas.settings import ParseSettings
from tasks.ingest.parse.docling_text import convert_page


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


def parse_html(data: bytes, revision: Revision, settings: ParseSettings) -> ParsedDocument:
    return ParsedDocument(revision_id=revision.revision_id, pages=[convert_page(_converter(), data, "html")])
