"""Inspect: sniff the media type from the bytes, enforce limits, quarantine what must not be parsed.

The name of a file is a claim; the bytes decide. A file whose bytes contradict its extension is
quarantined as disguised rather than handed to the wrong parser.
"""
from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import urlparse

from schemas.generation import Quarantined
from schemas.lineage import RECORD_MEDIA_TYPE, Revision
from schemas.settings import InspectionLimits

# What an extension claims; used only to detect disguised files.
EXTENSION_TYPES = {
    ".txt": "text/plain", ".text": "text/plain", ".md": "text/plain",
    ".pdf": "application/pdf", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
    ".tif": "image/tiff", ".tiff": "image/tiff", ".html": "text/html", ".htm": "text/html",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xml": "application/xml", ".alto": "application/alto+xml",
}


def sniff_media_type(data: bytes) -> str:
    head = data[:4096]
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "image/tiff"
    if head.startswith(b"PK\x03\x04"):
        if b"word/" in data[:65536] or b"[Content_Types].xml" in data[:65536]:
            return "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        return "application/zip"
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
    if lowered.startswith("<?xml") or lowered.startswith("<alto"):
        if "<alto" in lowered or "alto" in text[:2000].lower() and "<layout" in lowered:
            return "application/alto+xml"
        return "application/xml"
    if lowered.startswith("<!doctype html") or lowered.startswith("<html") or "<body" in lowered[:2000]:
        return "text/html"
    return "text/plain"


def claimed_type(uri: str) -> str | None:
    suffix = PurePosixPath(urlparse(uri).path).suffix.lower()
    return EXTENSION_TYPES.get(suffix)


def compatible(claimed: str, sniffed: str) -> bool:
    if claimed == sniffed:
        return True
    xmlish = {"application/xml", "application/alto+xml"}
    return claimed in xmlish and sniffed in xmlish


def inspect_revision(revision: Revision, data: bytes,
                     limits: InspectionLimits) -> tuple[Revision | None, Quarantined | None]:
    """Accept the revision with its sniffed media type, or quarantine it with a reason."""
    def refuse(reason: str) -> tuple[None, Quarantined]:
        return None, Quarantined(uri=revision.uri, reason=reason, digest=revision.digest)

    if len(data) == 0:
        return refuse("empty file (0 bytes)")
    if len(data) > limits.max_bytes:
        return refuse(f"file of {len(data)} bytes exceeds the limit of {limits.max_bytes}")
    if revision.media_type == RECORD_MEDIA_TYPE:
        return revision, None
    sniffed = sniff_media_type(data)
    claimed = claimed_type(revision.uri)
    if claimed and not compatible(claimed, sniffed):
        return refuse(f"disguised file: named as {claimed} but its bytes are {sniffed}")
    if sniffed == "text/plain" and not data.strip():
        return refuse("empty file (whitespace only)")
    return revision.model_copy(update={"media_type": sniffed}), None
