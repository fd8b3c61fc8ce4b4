"""PDF: the digital text layer where it is reliable, tesseract OCR of the render elsewhere.

The decision is made page by page, so a scanned register with a typed cover page gets the text
layer for the cover and OCR for the rest. Text-layer pages keep pymupdf's blocks (paragraphs)
and lines with their boxes in PDF points. docling's NativePdfPipeline works offline but yields
one item per line with no paragraphs or headings, so it adds nothing over pymupdf here.
"""
from __future__ import annotations

import logging
import threading
import unicodedata
from collections.abc import Iterator, Sequence

from tasks.pdf_library import pymupdf

from schemas.lineage import Element, ParsedDocument, ParsedPage, Revision
from schemas.settings import ParseSettings
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.normalize import normalize_text
from tasks.ingest.parse.ocr import ocr_pages
from tasks.ingest.render import PageRender, render_pdf_page

log = logging.getLogger(__name__)

PARSER = "pymupdf-text"
PARSER_VERSION = f"pymupdf-{pymupdf.VersionBind}"
# A text layer where more than this share of the characters are unmapped glyphs (U+FFFD,
# private use) or where fewer than this share of non-space characters are letters or digits
# is a broken font encoding, not text: the page is OCRed instead.
MAX_UNMAPPED_SHARE = 0.05
MIN_ALNUM_SHARE = 0.5
# pymupdf is not thread-safe, and parse tasks of the local runner share a process: every
# pymupdf call holds this lock; tesseract, which takes the time, runs outside it.
PYMUPDF_LOCK = threading.RLock()
# The text layer without image blocks: with them, pymupdf copies every page image's pixels
# into the result (0.15 s a page of a 300-dpi scan, more than a fifth of its OCR), unused here.
_TEXT_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES


def text_layer(page: pymupdf.Page) -> tuple[str, list[Element]]:
    """Raw text of the page's text layer: lines joined by newlines, blocks by a blank line."""
    parts: list[str] = []
    elements: list[Element] = []
    length = 0
    for block in page.get_text("dict", sort=True, flags=_TEXT_FLAGS)["blocks"]:
        if block.get("type") != 0:
            continue  # image block
        lines = []
        for line in block["lines"]:
            text = "".join(span["text"] for span in line["spans"]).strip()
            if text:
                lines.append((text, tuple(line["bbox"])))
        if not lines:
            continue
        if parts:
            parts.append("\n\n")
            length += 2
        block_start = length
        line_elements = []
        for i, (text, bbox) in enumerate(lines):
            if i:
                parts.append("\n")
                length += 1
            line_elements.append(Element(kind="line", char_start=length, char_end=length + len(text), bbox=bbox))
            parts.append(text)
            length += len(text)
        elements.append(Element(kind="paragraph", char_start=block_start, char_end=length,
                                bbox=tuple(block["bbox"])))
        elements.extend(line_elements)
    return "".join(parts), elements


def unreliable_reason(text: str, min_chars: int) -> str | None:
    """Why a text layer cannot be trusted, or None when it can."""
    visible = [c for c in text if not c.isspace()]
    if len(visible) < min_chars:
        return f"text layer has {len(visible)} characters (< {min_chars})"
    unmapped = sum(1 for c in visible if c == "\ufffd" or unicodedata.category(c) in ("Co", "Cc"))
    if unmapped / len(visible) > MAX_UNMAPPED_SHARE:
        return f"text layer has {unmapped} unmapped glyphs of {len(visible)}"
    alnum = sum(1 for c in visible if c.isalnum())
    if alnum / len(visible) < MIN_ALNUM_SHARE:
        return f"text layer is {alnum / len(visible):.0%} letters or digits"
    return None


def text_page(page: pymupdf.Page, text: str, elements: list[Element]) -> ParsedPage:
    return ParsedPage(
        page_no=page.number + 1, raw_text=text, normalized_text=normalize_text(text), parser=PARSER,
        parser_version=PARSER_VERSION, width=page.rect.width, height=page.rect.height,
        rotation=float(page.rotation), elements=elements,
    )


def parse_pdf(data: bytes, revision: Revision, settings: ParseSettings,
              pages: Sequence[int] | None = None) -> ParsedDocument:
    """The document's pages (or the 1-based `pages` only), each by its text layer or by OCR."""
    with PYMUPDF_LOCK:
        try:
            doc = pymupdf.open(stream=data, filetype="pdf")
        except Exception as exc:  # pymupdf raises its own FileDataError and plain RuntimeErrors
            raise ParseRefused(f"malformed PDF: {exc}") from None
    try:
        return _parse_open_pdf(doc, revision, settings, pages)
    finally:
        with PYMUPDF_LOCK:
            doc.close()


def _parse_open_pdf(doc: pymupdf.Document, revision: Revision, settings: ParseSettings,
                    pages: Sequence[int] | None) -> ParsedDocument:
    if doc.needs_pass:
        raise ParseRefused("encrypted PDF (a password is required)")
    numbers = range(doc.page_count) if pages is None else [n - 1 for n in pages]
    if any(not 0 <= n < doc.page_count for n in numbers):
        raise ParseRefused(f"PDF has {doc.page_count} pages; pages {list(pages or [])} asked for")
    parsed: dict[int, ParsedPage] = {}
    to_ocr: list[int] = []
    for number in numbers:
        with PYMUPDF_LOCK:
            page = doc[number]
            text, elements = text_layer(page)
            reason = unreliable_reason(text, settings.ocr.min_text_layer_chars)
            if reason is None:
                parsed[number + 1] = text_page(page, text, elements)
        if reason is not None:
            log.debug("%s page %d → OCR: %s", revision.doc_id, number + 1, reason)
            to_ocr.append(number)

    def renders() -> Iterator[PageRender]:
        for number in to_ocr:
            with PYMUPDF_LOCK:
                render = render_pdf_page(doc[number], settings.ocr.dpi, settings.limits.max_pixels)
            yield render

    for page in ocr_pages(renders(), settings.ocr):
        parsed[page.page_no] = page
    return ParsedDocument(revision_id=revision.revision_id, pages=[parsed[n] for n in sorted(parsed)])
