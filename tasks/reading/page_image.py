"""Page images as the reading room serves them: deterministic renders of the stored bytes, in the
frame the page was read in, so element boxes land on the pixels they were read from.

- Image files (PNG, JPEG, TIFF): the frame, EXIF orientation applied, then the turn OCR found.
- PDF pages: pymupdf at the recorded DPI (OCRed pages) or `reading_room.pdf_dpi` (text layer),
  /Rotate applied by pymupdf, then the turn OCR found; only the requested region is drawn, at
  the requested size.
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

from tasks.pdf_library import pymupdf
from PIL import Image, ImageSequence

from tasks.ingest.render import upright
from tasks.reading.catalog import (ALTO_MEDIA_TYPE, IMAGE_MEDIA_TYPES, PDF_MEDIA_TYPE, Catalog,
                                   PageInfo, RevisionInfo)
from tasks.reading.image_request import ImageRequest, ImageRequestError
from tasks.store.blobs import read_blob
from tasks.store.layout import StoreLayout

log = logging.getLogger(__name__)

# clockwise degrees → the PIL transpose that turns that far (as tasks/ingest/parse/ocr.py does)
_TURNS = {90: Image.Transpose.ROTATE_270, 180: Image.Transpose.ROTATE_180,
          270: Image.Transpose.ROTATE_90}


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


def render_image_file(data: bytes, page: PageInfo, max_pixels: int) -> Image.Image:
    """The whole frame, upright; refused (ImageRequestError 413) before decoding when its header
    announces more than `max_pixels` pixels."""
    try:
        with Image.open(io.BytesIO(data)) as opened:
            for number, frame in enumerate(ImageSequence.Iterator(opened), start=1):
                if number == page.page_no:
                    _within_budget(frame.width * frame.height, max_pixels)
                    turned, exif_degrees = upright(frame.copy())
                    return _turn(_display_mode(turned), (page.rotation or 0) - exif_degrees)
    except Image.DecompressionBombError:
        _within_budget(max_pixels + 1, max_pixels)
    raise LookupError(f"image has no frame {page.page_no}")


def _within_budget(pixels: int, max_pixels: int) -> None:
    if pixels > max_pixels:
        raise ImageRequestError(413, f"this page image holds {pixels:,} pixels, over this reading "
                                     f"room's render budget of {max_pixels:,} "
                                     "(settings.reading_room.max_render_pixels)")


def _unturn(box: tuple[float, float, float, float], turn: int, w: int, h: int) -> tuple[float, ...]:
    """A box of the turned frame as a box of the frame before a clockwise `turn` (w × h: the
    frame before it)."""
    x0, y0, x1, y1 = box
    if turn == 90:  # (x, y) went to (h - y, x)
        return y0, h - x1, y1, h - x0
    if turn == 180:
        return w - x1, h - y1, w - x0, h - y0
    if turn == 270:  # (x, y) went to (y, w - x)
        return w - y1, x0, w - y0, x1
    return x0, y0, x1, y1


def render_pdf_region(data: bytes, page: PageInfo, canvas: Canvas, request: ImageRequest) -> Image.Image:
    """The requested region of a PDF page at the requested size, rasterised at that size and no
    larger: the clip alone is drawn, at the zoom that maps it onto the output, so a page of any
    size costs what the answer costs (a 200-inch page at 150 dpi would be 900 million pixels)."""
    r = request.region
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        pdf_page = doc[page.page_no - 1]
        turn = int(round((page.rotation or 0) - pdf_page.rotation)) % 360
        turn = turn if turn in _TURNS else 0
        sideways = turn in (90, 270)
        # the frame pymupdf draws (its /Rotate applied), in canvas pixels before the OCR turn
        fw, fh = (canvas.height, canvas.width) if sideways else (canvas.width, canvas.height)
        ow, oh = (request.height, request.width) if sideways else (request.width, request.height)
        rect = pdf_page.rect
        sx, sy = fw / rect.width, fh / rect.height  # canvas pixels per point
        x0, y0, x1, y1 = _unturn((r.x, r.y, r.x + r.w, r.y + r.h), turn, fw, fh)
        clip = pymupdf.Rect(rect.x0 + x0 / sx, rect.y0 + y0 / sy, rect.x0 + x1 / sx, rect.y0 + y1 / sy)
        zoom = pymupdf.Matrix(ow / (x1 - x0) * sx, oh / (y1 - y0) * sy)
        pix = pdf_page.get_pixmap(matrix=zoom, clip=clip, alpha=False)
        image = Image.frombytes("RGB" if pix.n >= 3 else "L", (pix.width, pix.height), pix.samples)
        del pix
    if image.size != (ow, oh):  # the clip's pixel grid rounds outwards by at most a pixel
        image = image.resize((ow, oh), Image.Resampling.LANCZOS)
    return _turn(image, turn)


class PageRenderer:
    """Page images as answers to IIIF requests, within two budgets.

    - Per render: a PDF page is rasterised only over the requested region, at the requested
      size (bounded by `max_pixels` in tasks/reading/image_request.py); an image file is decoded
      whole (the formats are not tiled) only when its header announces at most
      `max_render_pixels`.
    - Kept: decoded image files and encoded answers share one least-recently-used cache of at
      most `cache_bytes`; anything larger than the budget is used once and not kept.
    """

    def __init__(self, layout: StoreLayout, pdf_dpi: int, cache_bytes: int,
                 max_render_pixels: int = 100_000_000):
        self.layout = layout
        self.pdf_dpi = pdf_dpi
        self.cache_bytes = cache_bytes
        self.max_render_pixels = max_render_pixels
        self._kept: OrderedDict[tuple, tuple[object, int]] = OrderedDict()  # key → (value, bytes)
        self._held = 0
        self._lock = threading.Lock()
        self._render_lock = threading.Lock()  # pymupdf is not thread-safe
        self.hits = self.misses = 0

    @property
    def held_bytes(self) -> int:
        return self._held

    def _get(self, key: tuple):
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key][0]
        return None

    def _keep(self, key: tuple, value, size: int) -> None:
        with self._lock:
            if size > self.cache_bytes or key in self._kept:
                return
            self._kept[key] = (value, size)
            self._held += size
            while self._held > self.cache_bytes:
                _, (_, dropped) = self._kept.popitem(last=False)
                self._held -= dropped

    def base(self, source: PageSource, canvas: Canvas) -> Image.Image:
        """An image file's whole frame at the canvas size (resized when a pixel off by rounding)."""
        key = (source.image_revision.revision_id, source.image_page.page_no, "base")
        image = self._get(key)
        if image is not None:
            return image
        with self._render_lock:
            data = read_blob(self.layout, source.image_revision.digest)
            image = render_image_file(data, source.image_page, self.max_render_pixels)
        if image.size != (canvas.width, canvas.height):
            log.debug("render of %s p%d is %s, canvas %dx%d: resized", key[0], key[1], image.size,
                      canvas.width, canvas.height)
            _within_budget(canvas.width * canvas.height, self.max_render_pixels)
            image = image.resize((canvas.width, canvas.height), Image.Resampling.LANCZOS)
        self._keep(key, image, image.width * image.height * len(image.getbands()))
        return image

    def render(self, source: PageSource, canvas: Canvas, request: ImageRequest) -> Image.Image:
        """The region at the output size of `request`."""
        if source.image_revision.media_type == PDF_MEDIA_TYPE:
            with self._render_lock:
                data = read_blob(self.layout, source.image_revision.digest)
                return render_pdf_region(data, source.image_page, canvas, request)
        r = request.region
        out = self.base(source, canvas).crop((r.x, r.y, r.x + r.w, r.y + r.h))
        if (out.width, out.height) != (request.width, request.height):
            out = out.resize((request.width, request.height), Image.Resampling.LANCZOS)
        return out

    def response(self, source: PageSource, canvas: Canvas, request: ImageRequest) -> bytes:
        key = (source.revision.revision_id, source.page.page_no, self.pdf_dpi, request.key)
        data = self._get(key)
        with self._lock:
            if data is not None:
                self.hits += 1
                return data
            self.misses += 1
        data = encode(finish(self.render(source, canvas, request), request), request.format)
        self._keep(key, data, len(data))
        return data

    def forget(self, keep_revisions: set[str]) -> None:
        """Drop cached pixels of every revision not in `keep_revisions` (deleted, superseded)."""
        with self._lock:
            for key in [k for k in self._kept if k[0] not in keep_revisions]:
                self._held -= self._kept.pop(key)[1]


BITONAL_THRESHOLD = 128  # grey levels below are black, the rest white


def finish(image: Image.Image, request: ImageRequest) -> Image.Image:
    """The last two steps of IIIF's order, on the region already at its size: mirror, then turn
    clockwise; then the quality (`gray`: luminance; `bitonal`: black or white; `default` and
    `color`: as rendered)."""
    if request.mirror:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    image = _turn(image, request.rotation)
    if request.quality == "gray":
        image = image.convert("L")
    elif request.quality == "bitonal":
        # kept as 8-bit L of 0 and 255: JPEG has no 1-bit mode, and viewers read L everywhere
        image = image.convert("L").point(lambda v: 255 if v >= BITONAL_THRESHOLD else 0)
    return image


def encode(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    if fmt == "jpg":
        image.save(buffer, format="JPEG", quality=85, optimize=False)
    else:
        image.save(buffer, format="PNG", compress_level=6)
    return buffer.getvalue()
