"""Render: page images for OCR, deterministic and recorded (DPI, rotation, page box).

PDF pages are rendered with pymupdf at the configured DPI (lowered when a page would exceed
the pixel limit, and the DPI actually used is recorded). Image files are decoded frame by frame
(multi-page TIFF), with EXIF orientation applied and recorded as the rotation.
"""
from __future__ import annotations

import io
import logging
import math
from collections.abc import Container, Iterator
from dataclasses import dataclass

from tasks.pdf_library import pymupdf
from PIL import Image, ImageSequence

DEFAULT_IMAGE_DPI = 300  # assumed when an image file does not say its resolution
_EXIF_ORIENTATION = 0x0112
_ORIENTATION_DEGREES = {3: 180, 6: 90, 8: 270}  # EXIF tag → clockwise turn applied, as PDF /Rotate
_TRANSPOSE = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,  # as exif_transpose
              4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
              6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE, 8: Image.Transpose.ROTATE_90}
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PageRender:
    """One page as pixels, with what is needed to map pixel boxes back to page units."""

    page_no: int  # 1-based
    image: Image.Image  # greyscale
    dpi: int
    rotation: int  # clockwise degrees the page was turned to be upright (PDF /Rotate, EXIF)
    width: float  # page box in the units of element boxes: points (PDF) or pixels (images)
    height: float
    scale: float  # multiply a pixel coordinate by this to get page units


def render_dpi(page_rect: pymupdf.Rect, dpi: int, max_pixels: int) -> int:
    """The configured DPI, or the highest one that keeps the render under the pixel limit."""
    pixels = (page_rect.width * dpi / 72) * (page_rect.height * dpi / 72)
    if pixels <= max_pixels:
        return dpi
    return max(int(dpi * math.sqrt(max_pixels / pixels)), 1)


def render_pdf_page(page: pymupdf.Page, dpi: int, max_pixels: int) -> PageRender:
    """Render the visible page (crop box, /Rotate applied) in greyscale."""
    used = render_dpi(page.rect, dpi, max_pixels)
    pix = page.get_pixmap(dpi=used, colorspace=pymupdf.csGRAY, alpha=False)
    image = Image.frombytes("L", (pix.width, pix.height), pix.samples)
    return PageRender(page_no=page.number + 1, image=image, dpi=used, rotation=page.rotation,
                      width=page.rect.width, height=page.rect.height, scale=72.0 / used)


def image_dpi(image: Image.Image) -> int:
    dpi = image.info.get("dpi")
    try:
        value = float(dpi[0]) if dpi else 0.0
    except (TypeError, ValueError, IndexError):
        value = 0.0
    # an EXIF resolution may say anything: NaN, infinity (a double), 10⁹ (a rational)
    value = round(value) if math.isfinite(value) and 0 < value < 100_000 else 0
    # Scanners sometimes write 1 or 72 meaning "unknown"; OCR needs a plausible resolution.
    return value if value >= 100 else DEFAULT_IMAGE_DPI


def upright(frame: Image.Image) -> tuple[Image.Image, int]:
    """The frame turned as its EXIF orientation says, and the clockwise turn applied.

    Only the orientation tag is read, and the pixels transposed here: ImageOps.exif_transpose
    also rewrites the whole EXIF block, which fails on values it cannot write back (a NaN
    resolution, for one) and refused a readable scan for its metadata.
    """
    try:
        orientation = frame.getexif().get(_EXIF_ORIENTATION, 1)
    except Exception as exc:  # an EXIF block Pillow cannot read: the pixels are read as stored
        log.info("EXIF block unreadable (%s); the image is read as stored", exc)
        orientation = 1
    method = _TRANSPOSE.get(orientation) if isinstance(orientation, int) else None
    if method is None:
        return frame, 0
    return frame.transpose(method), _ORIENTATION_DEGREES.get(orientation, 0)


def image_pages(data: bytes, pages: Container[int] | None = None) -> Iterator[PageRender]:
    """The frames of a PNG, JPEG or TIFF (the 1-based `pages` only, if given) as upright
    greyscale pages, in pixels."""
    with Image.open(io.BytesIO(data)) as image:
        for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
            if pages is not None and number not in pages:
                continue  # not decoded: another task reads that frame
            dpi = image_dpi(frame)
            turned, rotation = upright(frame.copy())
            grey = turned.convert("L")
            yield PageRender(page_no=number, image=grey, dpi=dpi, rotation=rotation,
                             width=float(grey.width), height=float(grey.height), scale=1.0)
