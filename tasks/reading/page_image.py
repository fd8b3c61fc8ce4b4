"""Page images as the reading room serves them: deterministic renders of the stored bytes, in the
frame the page was read in, so element boxes land on the pixels they were read from.

- Image files (PNG, JPEG, TIFF): the frame, EXIF orientation applied, then the turn OCR found.
- PDF pages: pymupdf at the recorded DPI (OCRed pages) or `reading_room.pdf_dpi` (text layer),
  /Rotate applied by pymupdf, then the turn OCR found.
- ALTO: the image ingested with it (same folder, the file ALTO names or the same stem).

A page's boxes are in its recorded units (PDF points, pixels, ALTO units); `Canvas.scale_x/y`
maps them onto the render. Same bytes and settings → same pixels, so renders cache by revision,
page and request.
"""
from __future__ import annotations

import io
import logging
import posixpath
import threading
from collections import OrderedDict
from dataclasses import dataclass

import pymupdf
from PIL import Image, ImageSequence

from tasks.ingest.render import upright
from tasks.reading.catalog import (ALTO_MEDIA_TYPE, IMAGE_MEDIA_TYPES, PDF_MEDIA_TYPE, Catalog,
                                   PageInfo, RevisionInfo)
from tasks.reading.image_request import ImageRequest
from tasks.store.blobs import read_blob
from tasks.store.layout import StoreLayout

log = logging.getLogger(__name__)

# clockwise degrees → the PIL transpose that turns that far (as tasks/ingest/parse/ocr.py does)
_TURNS = {90: Image.Transpose.ROTATE_270, 180: Image.Transpose.ROTATE_180,
          270: Image.Transpose.ROTATE_90}
BASE_RENDERS_KEPT = 6


@dataclass(frozen=True)
class PageSource:
    """Which stored bytes paint a page: the revision itself or the image an ALTO came with."""

    revision: RevisionInfo  # the revision whose page this is
    page: PageInfo
    image_revision: RevisionInfo  # whose bytes are rendered
    image_page: PageInfo  # that revision's page record (recorded DPI and rotation)


def has_image(revision: RevisionInfo) -> bool:
    return revision.media_type in IMAGE_MEDIA_TYPES or revision.media_type == PDF_MEDIA_TYPE


def alto_image_name(data: bytes) -> str | None:
    """The file name an ALTO's Description/sourceImageInformation gives, if any."""
    from defusedxml import ElementTree as SafeET

    try:
        root = SafeET.fromstring(data)
    except Exception:  # a malformed ALTO was refused at ingest; nothing to pair here
        return None
    for node in root.iter():
        if node.tag.rsplit("}", 1)[-1] == "fileName" and node.text and node.text.strip():
            return posixpath.basename(node.text.strip().replace("\\", "/"))
    return None


def alto_partner(layout: StoreLayout, catalog: Catalog, alto: RevisionInfo) -> RevisionInfo | None:
    """The page image ingested with an ALTO file: in the same folder, named by the ALTO's
    sourceImageInformation/fileName or sharing its stem."""
    folder, name = posixpath.split(alto.uri)
    stem = name.rsplit(".", 1)[0]
    named = alto_image_name(read_blob(layout, alto.digest))
    for rev in catalog.revisions.values():
        if rev.media_type not in IMAGE_MEDIA_TYPES:
            continue
        rfolder, rname = posixpath.split(rev.uri)
        if rfolder == folder and (rname == named or rname.rsplit(".", 1)[0] == stem):
            return rev
    return None


def page_source(layout: StoreLayout, catalog: Catalog, revision: RevisionInfo, page_no: int,
                partner: RevisionInfo | None = None) -> PageSource | None:
    """How to paint a page, or None when the format has no image (text, HTML, DOCX, records).

    For ALTO pass `partner` (alto_partner, already authorized for the viewer)."""
    page = catalog.page(revision.revision_id, page_no)
    if page is None:
        return None
    if has_image(revision):
        return PageSource(revision, page, revision, page)
    if revision.media_type == ALTO_MEDIA_TYPE and partner is not None:
        image_page = catalog.page(partner.revision_id, page_no)
        if image_page is not None:
            return PageSource(revision, page, partner, image_page)
    return None


@dataclass(frozen=True)
class Canvas:
    """A page's pixel size as served, and how its recorded boxes map onto it."""

    width: int
    height: int
    scale_x: float  # page units → pixels
    scale_y: float

    def to_pixels(self, bbox) -> tuple[float, float, float, float]:
        x0, y0, x1, y1 = bbox
        return x0 * self.scale_x, y0 * self.scale_y, x1 * self.scale_x, y1 * self.scale_y


def canvas_of(source: PageSource, pdf_dpi: int) -> Canvas | None:
    """Computed from the page records alone (no render): a manifest of many pages stays cheap.

    None when the page record has no size (nothing to paint)."""
    image_page = source.image_page
    if not image_page.width or not image_page.height:
        return None
    if source.image_revision.media_type == PDF_MEDIA_TYPE:
        dpi = image_page.dpi or pdf_dpi
        width, height = round(image_page.width * dpi / 72), round(image_page.height * dpi / 72)
    else:
        width, height = round(image_page.width), round(image_page.height)
    page = source.page  # an ALTO page's boxes are in ALTO units, its image's in pixels
    return Canvas(width=max(1, width), height=max(1, height),
                  scale_x=width / page.width if page.width else 1.0,
                  scale_y=height / page.height if page.height else 1.0)


def _turn(image: Image.Image, degrees: float) -> Image.Image:
    turn = int(round(degrees)) % 360
    return image.transpose(_TURNS[turn]) if turn in _TURNS else image


def _display_mode(image: Image.Image) -> Image.Image:
    return image if image.mode in ("L", "RGB") else image.convert("RGB")


def render_image_file(data: bytes, page: PageInfo) -> Image.Image:
    with Image.open(io.BytesIO(data)) as opened:
        for number, frame in enumerate(ImageSequence.Iterator(opened), start=1):
            if number == page.page_no:
                turned, exif_degrees = upright(frame.copy())
                return _turn(_display_mode(turned), (page.rotation or 0) - exif_degrees)
    raise LookupError(f"image has no frame {page.page_no}")


def render_pdf(data: bytes, page: PageInfo, default_dpi: int) -> Image.Image:
    dpi = page.dpi or default_dpi
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        pdf_page = doc[page.page_no - 1]
        pix = pdf_page.get_pixmap(dpi=dpi, alpha=False)
        image = Image.frombytes("RGB" if pix.n >= 3 else "L", (pix.width, pix.height), pix.samples)
        return _turn(image, (page.rotation or 0) - pdf_page.rotation)


class PageRenderer:
    """Base renders (one per page) and encoded responses (one per request), both bounded."""

    def __init__(self, layout: StoreLayout, pdf_dpi: int, cache_bytes: int):
        self.layout = layout
        self.pdf_dpi = pdf_dpi
        self.cache_bytes = cache_bytes
        self._bases: OrderedDict[tuple, Image.Image] = OrderedDict()
        self._responses: OrderedDict[tuple, bytes] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._render_lock = threading.Lock()  # pymupdf is not thread-safe
        self.hits = self.misses = 0

    def base(self, source: PageSource, canvas: Canvas) -> Image.Image:
        """The whole page at the canvas size (a render a pixel off by rounding is resized)."""
        key = (source.image_revision.revision_id, source.image_page.page_no, self.pdf_dpi)
        with self._lock:
            if key in self._bases:
                self._bases.move_to_end(key)
                return self._bases[key]
        with self._render_lock:
            data = read_blob(self.layout, source.image_revision.digest)
            if source.image_revision.media_type == PDF_MEDIA_TYPE:
                image = render_pdf(data, source.image_page, self.pdf_dpi)
            else:
                image = render_image_file(data, source.image_page)
        if image.size != (canvas.width, canvas.height):
            log.debug("render of %s p%d is %s, canvas %dx%d: resized", key[0], key[1], image.size,
                      canvas.width, canvas.height)
            image = image.resize((canvas.width, canvas.height), Image.Resampling.LANCZOS)
        with self._lock:
            self._bases[key] = image
            while len(self._bases) > BASE_RENDERS_KEPT:
                self._bases.popitem(last=False)
        return image

    def response(self, source: PageSource, canvas: Canvas, request: ImageRequest) -> bytes:
        key = (source.revision.revision_id, source.page.page_no, self.pdf_dpi, request.key)
        with self._lock:
            if key in self._responses:
                self._responses.move_to_end(key)
                self.hits += 1
                return self._responses[key]
            self.misses += 1
        data = encode(self.base(source, canvas), request)
        with self._lock:
            if len(data) <= self.cache_bytes and key not in self._responses:
                self._responses[key] = data
                self._held += len(data)
                while self._held > self.cache_bytes:
                    _, dropped = self._responses.popitem(last=False)
                    self._held -= len(dropped)
        return data

    def forget(self, keep_revisions: set[str]) -> None:
        """Drop cached pixels of every revision not in `keep_revisions` (deleted, superseded)."""
        with self._lock:
            for key in [k for k in self._responses if k[0] not in keep_revisions]:
                self._held -= len(self._responses.pop(key))
            for key in [k for k in self._bases if k[0] not in keep_revisions]:
                del self._bases[key]


def encode(image: Image.Image, request: ImageRequest) -> bytes:
    r = request.region
    out = image.crop((r.x, r.y, r.x + r.w, r.y + r.h))
    if (out.width, out.height) != (request.width, request.height):
        out = out.resize((request.width, request.height), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    if request.format == "jpg":
        out.save(buffer, format="JPEG", quality=85, optimize=False)
    else:
        out.save(buffer, format="PNG", compress_level=6)
    return buffer.getvalue()
