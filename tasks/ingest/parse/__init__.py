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
import hashlib
import json
import logging

from schemas.generation import Quarantined
from tasks.progress import StageProgress
from tasks.store.blobs import read_blob
from tasks.store.cache import load_parsed, save_parsed
from tasks.store.layout import StoreLayout
from tasks.task_wrapper import as_task

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


log = logging.getLogger(__name__)


def parse_key(settings: MabillonSettings) -> str:
    """Parsed output depends on the OCR and limit settings; a change re-parses."""
    # Worker and thread counts change how fast, not what: they stay out of the key.
    ocr = settings.ocr.model_dump(exclude={"workers", "tesseract_threads"})
    blob = json.dumps({"ocr": ocr, "v": 1}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def textless(doc: ParsedDocument) -> str | None:
    """Why a parsed document has no text at all (its pages' own reasons), or None when it has."""
    if any(page.raw_text.strip() for page in doc.pages):
        return None
    reasons = sorted({page.empty_reason or "no text" for page in doc.pages})
    return f"no text found on any of its {len(doc.pages)} page(s): {'; '.join(reasons)}"


def parse_untrusted(data: bytes, revision: Revision, settings: MabillonSettings) -> ParsedDocument:
    """`parse_revision` in the sandbox's child process, under `settings.sandbox`."""
    from tasks.ingest.sandbox import parse_untrusted as sandboxed

    return sandboxed(data, revision, settings)


def parse(revisions: list[Revision], layout: StoreLayout, settings: MabillonSettings) -> tuple[dict[str, ParsedDocument], list[Quarantined]]:
    key = parse_key(settings)
    parsed: dict[str, ParsedDocument] = {}
    quarantined: list[Quarantined] = []
    with StageProgress("parse", len(revisions), "doc") as progress:
        for rev in revisions:
            doc = load_parsed(layout, rev.revision_id, key)
            if doc is None:
                try:
                    doc = parse_untrusted(read_blob(layout, rev.digest), rev, settings)
                except ParseRefused as exc:
                    quarantined.append(Quarantined(uri=rev.uri, reason=str(exc), digest=rev.digest))
                    progress.advance()
                    continue
                except Exception as exc:  # a parser bug on one file must not sink the batch
                    log.exception("parser failed on %s", rev.uri)
                    quarantined.append(Quarantined(uri=rev.uri, digest=rev.digest,
                                                   reason=f"parser error: {type(exc).__name__}: {exc}"))
                    progress.advance()
                    continue
                save_parsed(layout, doc, key)
            if (reason := textless(doc)) is not None:  # nothing to chunk, embed or find
                quarantined.append(Quarantined(uri=rev.uri, reason=reason, digest=rev.digest))
                progress.advance()
                continue
            parsed[rev.revision_id] = doc
            progress.advance()
    return parsed, quarantined


parse_task = as_task(parse, "parse")
