"""Parse: revision bytes → pages of raw and normalised text, with elements and their boxes.

Each media type has one parser; adding a format is adding a module and a line in PARSERS.
A parser returns a ParsedDocument or raises ParseRefused (the input is quarantined with the
reason; the batch goes on). Paged formats (PDF, multi-frame images) also parse a selection of
their pages, so the parse stage can hand the pages of a long scan to several workers.
"""
from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

from schemas.lineage import RECORD_MEDIA_TYPE, ParsedDocument, Revision
from schemas.package import ARTICLE_MEDIA_TYPE
from schemas.settings import OcrSettings, ParseSettings
from tasks.ingest.parse.alto import parse_alto
from tasks.ingest.parse.article import parse_article
from tasks.ingest.parse.docx import parse_docx
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.html import parse_html
from tasks.ingest.parse.image import parse_image
from tasks.ingest.parse.ocr import OCR_STOPPED
from tasks.ingest.parse.pdf import parse_pdf
from tasks.ingest.parse.plaintext import parse_plaintext
from tasks.ingest.parse.export_record import parse_record

Parser = Callable[[bytes, Revision, ParseSettings], ParsedDocument]
PagedParser = Callable[[bytes, Revision, ParseSettings, Sequence[int] | None], ParsedDocument]

PAGED_PARSERS: dict[str, PagedParser] = {
    "application/pdf": parse_pdf,
    "image/png": parse_image,
    "image/jpeg": parse_image,
    "image/tiff": parse_image,
}
PARSERS: dict[str, Parser] = {
    RECORD_MEDIA_TYPE: parse_record,
    ARTICLE_MEDIA_TYPE: parse_article,
    "text/plain": parse_plaintext,
    "text/html": parse_html,
    "application/alto+xml": parse_alto,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": parse_docx,
    **PAGED_PARSERS,
}
# docling's converters are shared per process and not known to be thread-safe; with the local
# runner, parse tasks run on threads. (pymupdf has its own lock in pdf.py; OCR runs outside both.)
_UNPAGED_LOCK = threading.Lock()


def parser_for(media_type: str) -> Parser | None:
    return PARSERS.get(media_type)


def is_paged(media_type: str) -> bool:
    return media_type in PAGED_PARSERS


def parse_revision(data: bytes, revision: Revision, settings: ParseSettings,
                   pages: Sequence[int] | None = None) -> ParsedDocument:
    """The revision's pages (1-based `pages` of a paged format only; None: all of them)."""
    if pages is not None:
        paged = PAGED_PARSERS.get(revision.media_type)
        if paged is None:
            raise ValueError(f"{revision.media_type} has no pages to select")
        return paged(data, revision, settings, pages)
    parser = parser_for(revision.media_type)
    if parser is None:
        raise ParseRefused(f"no parser for media type {revision.media_type}")
    if is_paged(revision.media_type):
        return parser(data, revision, settings)
    with _UNPAGED_LOCK:
        return parser(data, revision, settings)


def parse_key(ocr: OcrSettings) -> str:
    """Parsed output depends on the OCR settings; a change re-parses."""
    # Worker and thread counts change how fast, not what: they stay out of the key.
    blob = json.dumps({"ocr": ocr.model_dump(exclude={"workers", "tesseract_threads"}), "v": 1},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


# Bumped when a change of our parsing code could turn a refusal into a reading (a malformed
# file now repaired, a format now read): remembered refusals of the older code are then retried.
REFUSALS_VERSION = 1


@functools.cache
def parser_versions() -> dict[str, str]:
    """The engines a refusal depends on; an upgrade of one parses refused bytes again."""
    from tasks.ingest.parse.ocr import tesseract_version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "absent"
    return {"tesseract": tesseract_version(), "pymupdf": installed("pymupdf"), "pillow": installed("pillow"),
            "docling": installed("docling-slim"), "mabillon": str(REFUSALS_VERSION)}


def refusal_key(settings: ParseSettings) -> str:
    """What decides a parse's outcome besides the bytes: the key refusals are remembered under."""
    blob = json.dumps({"parse": parse_key(settings.ocr), "limits": settings.limits.model_dump(),
                       "sandbox": settings.sandbox.model_dump(exclude={"recycle_after"}),
                       "versions": parser_versions()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def textless_is_lasting(doc: ParsedDocument) -> bool:
    """A document without text stays so under the same settings, unless OCR ran out of time on
    one of its pages (that depends on how busy the machine was)."""
    return not any((p.empty_reason or "").startswith(OCR_STOPPED) for p in doc.pages)


def textless_reason(doc: ParsedDocument) -> str | None:
    """Why a parsed document cannot be published (no text on any page), or None.

    Such a document would reach the index as a source nobody can find, and its empty chunk
    batch used to sink the whole release in the tokenizer; it is quarantined with what its
    pages say instead (a blank scan, a damaged PDF whose content was lost).
    """
    if any(p.raw_text.strip() for p in doc.pages):
        return None
    if not doc.pages:
        return "no pages could be read"
    reasons = sorted({p.empty_reason or "no text on the page" for p in doc.pages})
    return f"no text found on any of its {len(doc.pages)} page(s): {'; '.join(reasons)}"
