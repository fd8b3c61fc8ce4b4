"""Per-format checks run at inspection: each opens the bytes just far enough to say whether they
may be parsed, and returns the reason for refusing them or None. Nothing here decodes pixels,
runs scripts, or resolves references out of the file.

pymupdf and PIL load at the first PDF or image (0.75 s of imports for pymupdf): a release of
records, ALTO or HTML, and every process that imports the release flow, never pays for them.
"""
from __future__ import annotations

import io
import logging
import re
import zipfile

from schemas.settings import InspectionLimits

log = logging.getLogger(__name__)

# PDF actions that run code or open other programs. Embedded files (PDF/A-3 attachments) are
# not refused: they are never opened, only the page content is read.
_PDF_ACTIVE = re.compile(rb"/(JavaScript|JS|Launch|RichMedia)\b")
_XML_DECLARATIONS = re.compile(rb"<!(DOCTYPE|ENTITY)\b", re.I)
_MACRO_PARTS = ("vbaProject.bin", "vbaData.xml")


def check_pdf(data: bytes, limits: InspectionLimits) -> str | None:
    from tasks.pdf_library import pymupdf

    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # pymupdf raises FileDataError or RuntimeError on garbage
        return f"malformed PDF: {exc}"
    with doc:
        if doc.needs_pass:
            return "encrypted PDF (a password is required to read it)"
        if doc.is_repaired:
            log.warning("PDF had a damaged cross-reference table; pymupdf repaired it")
        if doc.page_count == 0:
            return "malformed PDF: no pages"
        if doc.page_count > limits.max_pages:
            return f"PDF of {doc.page_count} pages exceeds the limit of {limits.max_pages}"
        for page in doc:  # the page box is read from the page tree; nothing is drawn
            side = max(page.rect.width, page.rect.height) / 72
            if side > limits.max_page_inches:
                return (f"PDF page {page.number + 1} is {page.rect.width / 72:.0f} × "
                        f"{page.rect.height / 72:.0f} in, over the limit of {limits.max_page_inches:g} in a side")
        for xref in range(1, doc.xref_length()):
            try:
                obj = doc.xref_object(xref, compressed=True).encode("latin-1", "replace")
            except Exception:  # a broken object is not active content; the parser copes or refuses
                continue
            found = _PDF_ACTIVE.search(obj)
            if found:
                return f"active content: PDF contains a /{found.group(1).decode()} action"
    return None


def check_image(data: bytes, limits: InspectionLimits) -> str | None:
    """Dimensions and frame count from the headers; verify() checks the data without decoding."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            frames = getattr(image, "n_frames", 1)
            width, height = image.size
            if frames > limits.max_pages:
                return f"image of {frames} frames exceeds the limit of {limits.max_pages} pages"
            if width * height > limits.max_pixels:
                return (f"image of {width}×{height} = {width * height} pixels exceeds the limit "
                        f"of {limits.max_pixels}")
            image.verify()
    except UnidentifiedImageError:  # its message names a BytesIO object, which tells the reader nothing
        return "malformed image: the header cannot be read (corrupt or truncated)"
    except Image.DecompressionBombError as exc:  # PIL refuses to open past 2× its own ceiling
        announced = re.search(r"\((\d+) pixels\)", str(exc))
        size = f"{announced.group(1)} pixels" if announced else "a pixel count"
        return f"image bomb: its header announces {size}, over the limit of {limits.max_pixels}"
    except (OSError, SyntaxError, ValueError) as exc:
        return f"malformed image: {exc}"
    return None


def check_docx(data: bytes, limits: InspectionLimits) -> str | None:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        return f"malformed DOCX: {exc}"
    with archive:
        names = archive.namelist()
        if "word/document.xml" not in names:
            return "malformed DOCX: no word/document.xml in the archive"
        if any(name.rsplit("/", 1)[-1] in _MACRO_PARTS for name in names):
            return "active content: Word document with macros"
        unpacked = sum(info.file_size for info in archive.infolist())
        if unpacked > limits.max_bytes:
            return f"DOCX unpacks to {unpacked} bytes, over the limit of {limits.max_bytes}"
        if unpacked > limits.max_archive_ratio * max(len(data), 1):
            return (f"DOCX unpacks to {unpacked / len(data):.0f} times its size "
                    f"(limit {limits.max_archive_ratio}): a zip bomb is not parsed")
    return None


def check_xml(data: bytes, limits: InspectionLimits) -> str | None:
    # Entity declarations are how XML bombs and external-entity reads work; ALTO never needs them.
    found = _XML_DECLARATIONS.search(data)
    if found:
        return f"XML with a <!{found.group(1).decode().upper()}> declaration is not parsed"
    return None


def page_count(data: bytes, media_type: str) -> int:
    """Pages of a PDF or frames of an image (1 for anything else); called on accepted bytes."""
    try:
        if media_type == "application/pdf":
            from tasks.pdf_library import pymupdf

            with pymupdf.open(stream=data, filetype="pdf") as doc:
                return doc.page_count
        if media_type.startswith("image/"):
            from PIL import Image

            with Image.open(io.BytesIO(data)) as image:
                return getattr(image, "n_frames", 1)
    except Exception:  # accepted bytes open; if not, the parser says why, page by page is moot
        return 1
    return 1
