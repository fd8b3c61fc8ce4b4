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
import pkgutil
import threading
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

from schemas.lineage import RECORD_MEDIA_TYPE, ParsedDocument, Revision
from schemas.package import ARTICLE_MEDIA_TYPE
from schemas.settings import OcrSettings, ParseSettings
from tasks.ingest.parse.errors import OCR_STOPPED, ParseRefused

Parser = Callable[[bytes, Revision, ParseSettings], ParsedDocument]
PagedParser = Callable[[bytes, Revision, ParseSettings, Sequence[int] | None], ParsedDocument]

# Each parser by where it lives, imported at its first use: a process that reads exports only
# (or deletes, or promotes, which import chunking) loads neither pymupdf nor docling.
PAGED_PARSERS: dict[str, str] = {
    "application/pdf": "tasks.ingest.parse.pdf:parse_pdf",
    "image/png": "tasks.ingest.parse.image:parse_image",
    "image/jpeg": "tasks.ingest.parse.image:parse_image",
    "image/tiff": "tasks.ingest.parse.image:parse_image",
}
PARSERS: dict[str, str] = {
    RECORD_MEDIA_TYPE: "tasks.ingest.parse.export_record:parse_record",
    ARTICLE_MEDIA_TYPE: "tasks.ingest.parse.article:parse_article",
    "text/plain": "tasks.ingest.parse.plaintext:parse_plaintext",
    "text/html": "tasks.ingest.parse.html:parse_html",
    "application/alto+xml": "tasks.ingest.parse.alto:parse_alto",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "tasks.ingest.parse.docx:parse_docx",
    **PAGED_PARSERS,
}


@functools.cache
def _load(where: str) -> Callable:
    return pkgutil.resolve_name(where)


# docling's converters are shared per process and not known to be thread-safe; with the local
# runner, parse tasks run on threads. (pymupdf has its own lock in pdf.py; OCR runs outside both.)
_UNPAGED_LOCK = threading.Lock()


def parser_for(media_type: str) -> Parser | None:
    where = PARSERS.get(media_type)
    return _load(where) if where else None


def is_paged(media_type: str) -> bool:
    return media_type in PAGED_PARSERS


def parse_revision(data: bytes, revision: Revision, settings: ParseSettings,
                   pages: Sequence[int] | None = None) -> ParsedDocument:
    """The revision's pages (1-based `pages` of a paged format only; None: all of them)."""
    if pages is not None:
        if revision.media_type not in PAGED_PARSERS:
            raise ValueError(f"{revision.media_type} has no pages to select")
        return _load(PAGED_PARSERS[revision.media_type])(data, revision, settings, pages)
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
