"""Page images (PNG, JPEG, TIFF): every frame is OCRed; boxes are in pixels of the upright image.

Upright means after the EXIF orientation and, for a frame scanned sideways or upside down, the
turn OCR found (ocr.read_upright); the page's `rotation` is the sum, clockwise.
"""
from __future__ import annotations

from collections.abc import Sequence

from PIL import Image, UnidentifiedImageError

from schemas.lineage import ParsedDocument, Revision
from schemas.settings import ParseSettings
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.ocr import ocr_pages
from tasks.ingest.render import image_pages


def parse_image(data: bytes, revision: Revision, settings: ParseSettings,
                pages: Sequence[int] | None = None) -> ParsedDocument:
    """Every frame, or the 1-based frames in `pages` (the parse stage splits long scans)."""
    try:
        parsed = ocr_pages(image_pages(data, pages), settings.ocr)
    except UnidentifiedImageError:  # its message names a BytesIO object, which tells the reader nothing
        raise ParseRefused("malformed image: the header cannot be read (corrupt or truncated)") from None
    except (OSError, SyntaxError, Image.DecompressionBombError) as exc:
        if isinstance(exc, OSError) and "out of memory" in str(exc):
            # PIL's decoder failing to allocate (its status -9): the memory limit was met, not a
            # fault of the file, whose refusal would be remembered as lasting
            raise MemoryError(str(exc)) from None
        # PIL reports truncated or corrupt image data as OSError (SyntaxError for some TIFFs).
        raise ParseRefused(f"malformed image: {exc}") from None
    if not parsed:
        raise ParseRefused("image has no frames" if pages is None else f"image has no frames {list(pages)}")
    return ParsedDocument(revision_id=revision.revision_id, pages=parsed)
