"""Inspect: sniff the media type from the bytes, enforce limits, quarantine what must not be parsed.

The name of a file is a claim; the bytes decide. A file whose bytes contradict its extension is
quarantined as disguised rather than handed to the wrong parser (text-like types — plain, HTML,
XML — may stand for one another). Each binary format then gets its own check
(tasks/ingest/content_checks.py): encrypted, malformed, over-limit or active content is refused.
Gzip is an encoding, not a format: a gzip stream (known by its magic bytes, whatever the name)
is inflated within the size limit and what it holds is inspected; only ALTO is read that way,
as libraries deliver it (`page-0001.xml.gz`), and the parser inflates it again as a stream.
"""
from __future__ import annotations

import io
import logging
import re
import zipfile
from collections.abc import Callable
from pathlib import PurePosixPath
from urllib.parse import urlparse

from schemas.generation import Quarantined, Screened
from schemas.lineage import RECORD_MEDIA_TYPE, Revision
from schemas.package import ARTICLE_MEDIA_TYPE
from schemas.settings import InspectionLimits
from tasks.ingest.content_checks import check_docx, check_image, check_pdf, check_xml, page_count
from tasks.ingest.gunzip import InflateRefused, inflate, is_gzip
from tasks.progress import StageProgress
from tasks.store.blobs import read_blob
from tasks.store.layout import StoreLayout
from tasks.task_wrapper import as_task

log = logging.getLogger(__name__)

ALTO_MEDIA_TYPE = "application/alto+xml"
GZIP_MEDIA_TYPE = "application/gzip"
DOCX_MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

# What an extension claims; used only to detect disguised files.
EXTENSION_TYPES = {
    ".txt": "text/plain", ".text": "text/plain", ".md": "text/plain",
    ".pdf": "application/pdf", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
    ".tif": "image/tiff", ".tiff": "image/tiff", ".html": "text/html", ".htm": "text/html",
    ".docx": DOCX_MEDIA_TYPE, ".xml": "application/xml", ".alto": ALTO_MEDIA_TYPE,
}
# The root element of an XML document: the first tag that is not a declaration, comment or PI.
_XML_ROOT = re.compile(r"<(?![?!])(?:[\w.-]+:)?([\w.-]+)")
# Byte-order marks of UTF-32 and UTF-16 (UTF-32 first: its little-endian mark starts like UTF-16's).
TEXT_BOMS = (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff", b"\xff\xfe", b"\xfe\xff")
# Text-like types: a name that says one and bytes that say another are not a disguise.
_TEXT_FAMILY = {"text/plain", "text/html", "application/xml", ALTO_MEDIA_TYPE}
_CHECKS: dict[str, Callable[[bytes, InspectionLimits], str | None]] = {
    "application/pdf": check_pdf, "image/png": check_image, "image/jpeg": check_image,
    "image/tiff": check_image, DOCX_MEDIA_TYPE: check_docx, ALTO_MEDIA_TYPE: check_xml,
}


def sniff_media_type(data: bytes) -> str:
    head = data[:4096]
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):  # TIFF, BigTIFF
        return "image/tiff"
    if is_gzip(head):
        return GZIP_MEDIA_TYPE
    if head.startswith(b"PK\x03\x04"):
        return DOCX_MEDIA_TYPE if is_word_archive(data) else "application/zip"
    if head.startswith(TEXT_BOMS):  # UTF-16/32 text is full of NULs, yet text
        return "text/plain"
    if b"\x00" in head:
        return "application/octet-stream"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        try:
            data.decode("utf-8")
            text = head.decode("utf-8", errors="ignore")
        except UnicodeDecodeError:
            text = head.decode("latin-1")
    lowered = text.lstrip("\ufeff \t\r\n").lower()
    if lowered.startswith("<?xml") or lowered.startswith("<alto") or lowered.startswith("<!--"):
        root = _XML_ROOT.search(lowered)
        if root and root.group(1) == "alto":
            return ALTO_MEDIA_TYPE
        if root and root.group(1) == "html":
            return "text/html"
        if lowered.startswith("<?xml") or lowered.startswith("<alto"):
            return "application/xml"
    if lowered.startswith("<!doctype html") or lowered.startswith("<html") or "<body" in lowered[:2000]:
        return "text/html"
    return "text/plain"


def is_word_archive(data: bytes) -> bool:
    """A zip whose central directory names word/document.xml (xlsx and odt do not)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return "word/document.xml" in archive.namelist()
    except zipfile.BadZipFile:
        # Damaged central directory: fall back to the local headers, so the DOCX check
        # can say what is wrong instead of calling it an unknown zip.
        return b"word/" in data[:65536]


def claimed_type(uri: str) -> str | None:
    suffix = PurePosixPath(urlparse(uri).path).suffix.lower()
    return EXTENSION_TYPES.get(suffix)


def compatible(claimed: str, sniffed: str) -> bool:
    return claimed == sniffed or (claimed in _TEXT_FAMILY and sniffed in _TEXT_FAMILY)


def inspect_revision(revision: Revision, data: bytes,
                     limits: InspectionLimits) -> tuple[Revision | None, Quarantined | None]:
    """Accept the revision with its sniffed media type, or quarantine it with a reason."""
    def refuse(reason: str) -> tuple[None, Quarantined]:
        log.info("quarantined %s: %s", revision.uri, reason)
        return None, Quarantined(uri=revision.uri, reason=reason, digest=revision.digest)

    if len(data) == 0:
        return refuse("empty file (0 bytes)")
    if len(data) > limits.max_bytes:
        return refuse(f"file of {len(data)} bytes exceeds the limit of {limits.max_bytes}")
    if revision.media_type in (RECORD_MEDIA_TYPE, ARTICLE_MEDIA_TYPE):  # built by acquisition, not sniffed
        return revision, None
    sniffed = sniff_media_type(data)
    if sniffed == GZIP_MEDIA_TYPE:
        try:  # a bomb or a damaged stream stops here, before anything holds the inflated bytes
            data = inflate(data, limits.max_bytes)
        except InflateRefused as exc:
            return refuse(str(exc))
        sniffed = sniff_media_type(data)
        if sniffed != ALTO_MEDIA_TYPE:
            return refuse(f"gzip-compressed {sniffed}: of compressed files only ALTO is read; "
                          "ingest the file it holds uncompressed")
    claimed = claimed_type(revision.uri)
    if claimed and not compatible(claimed, sniffed):
        return refuse(f"disguised file: named as {claimed} but its bytes are {sniffed}")
    if sniffed == "application/octet-stream":
        return refuse("unrecognised binary content (not a supported format)")
    if sniffed == "application/zip":  # archives are never unpacked: what is inside was not inspected
        return refuse("zip archive that is not a Word document: archives are not unpacked; "
                      "ingest the files it holds instead")
    if sniffed in _TEXT_FAMILY and not data.strip():
        return refuse("empty file (whitespace only)")
    check = _CHECKS.get(sniffed)
    reason = check(data, limits) if check else None
    if reason:
        return refuse(reason)
    return revision.model_copy(update={"media_type": sniffed}), None


def inspect(acquired: Screened, layout: StoreLayout, limits: InspectionLimits) -> Screened:
    """The acquired revisions that may be parsed, with their page counts; the rest quarantined."""
    kept, quarantined, pages = [], list(acquired.quarantined), {}
    with StageProgress("inspect", len(acquired.kept), "source") as progress:
        for rev in acquired.kept:
            data = read_blob(layout, rev.digest)
            ok, refused = inspect_revision(rev, data, limits)
            if ok is not None:
                kept.append(ok)
                if (n := page_count(data, ok.media_type)) > 1:
                    pages[ok.revision_id] = n
            else:
                quarantined.append(refused)
                log.warning("quarantined %s: %s", refused.uri, refused.reason)
            progress.advance()
    return Screened(kept=kept, quarantined=quarantined, pages=pages)


inspect_task = as_task(inspect, "inspect", reads_storage=True)
