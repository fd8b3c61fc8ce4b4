"""OCR: tesseract on a page render → raw text with line and word boxes and confidences.

Raw text is built from tesseract's own layout: words joined by spaces, lines by a newline,
paragraphs and blocks by a blank line, so each element's offsets point into that raw text.
Pages are OCRed in a thread pool: pytesseract runs tesseract as a subprocess, so threads give
real parallelism without copying page images between processes.

Pages scanned sideways or upside down are turned before they are read (`read_upright`): the
render is OCRed as it is first, and only a result that looks wrong (low confidence, or words
running down the page) pays for tesseract's orientation detection and a second OCR.
"""
from __future__ import annotations

import functools
import logging
import os
import time
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pytesseract
from PIL import Image, ImageFilter

from schemas.lineage import Element, ParsedPage
from schemas.settings import OcrSettings
from tasks.ingest.parse.normalize import normalize_text
from tasks.ingest.render import PageRender

log = logging.getLogger(__name__)

_WORD_LEVEL = 5


@dataclass(frozen=True)
class OcrText:
    text: str
    elements: list[Element]  # per line ("line") then its words ("word"), in reading order
    confidence: float | None  # mean word confidence weighted by word length, 0–1


@functools.cache
def tesseract_version() -> str:
    return str(pytesseract.get_tesseract_version())


def _union(boxes: Sequence[tuple[float, float, float, float]]) -> tuple[float, float, float, float]:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes))


def assemble(data: dict[str, list], scale: float) -> OcrText:
    """Turn pytesseract's image_to_data dictionary into raw text and elements.

    `scale` maps pixels to page units (72/dpi for PDF pages, 1 for image files).
    """
    parts: list[str] = []
    elements: list[Element] = []
    length = 0
    weighted, chars = 0.0, 0
    previous_par = previous_line = None
    line_words: list[Element] = []

    def close_line() -> None:
        if line_words:
            confidences = [w.confidence for w in line_words if w.confidence is not None]
            elements.append(Element(
                kind="line", char_start=line_words[0].char_start, char_end=line_words[-1].char_end,
                bbox=_union([w.bbox for w in line_words if w.bbox]),
                confidence=sum(confidences) / len(confidences) if confidences else None))
            elements.extend(line_words)
            line_words.clear()

    for i, level in enumerate(data["level"]):
        word = str(data["text"][i]).strip()
        if level != _WORD_LEVEL or not word:
            continue
        par = (data["page_num"][i], data["block_num"][i], data["par_num"][i])
        line = par + (data["line_num"][i],)
        if previous_line is not None:
            separator = " " if line == previous_line else ("\n" if par == previous_par else "\n\n")
            if line != previous_line:
                close_line()
            parts.append(separator)
            length += len(separator)
        previous_par, previous_line = par, line
        left, top = data["left"][i], data["top"][i]
        box = (left * scale, top * scale, (left + data["width"][i]) * scale,
               (top + data["height"][i]) * scale)
        conf = float(data["conf"][i])
        confidence = conf / 100.0 if conf >= 0 else None
        line_words.append(Element(kind="word", char_start=length, char_end=length + len(word),
                                  bbox=box, confidence=confidence))
        parts.append(word)
        length += len(word)
        if confidence is not None:
            weighted += confidence * len(word)
            chars += len(word)
    close_line()
    return OcrText(text="".join(parts), elements=elements,
                   confidence=weighted / chars if chars else None)


def prepare(render: PageRender, settings: OcrSettings) -> Image.Image:
    """The image tesseract reads: the render, median-filtered when settings.denoise."""
    return render.image.filter(ImageFilter.MedianFilter(3)) if settings.denoise else render.image


def read_image(image: Image.Image, dpi: int, scale: float, settings: OcrSettings,
               timeout_s: float) -> OcrText:
    """OCR an already prepared image. Raises RuntimeError when tesseract runs past timeout_s."""
    data = pytesseract.image_to_data(
        image, lang=settings.language, config=f"--psm {settings.page_segmentation} --dpi {dpi}",
        output_type=pytesseract.Output.DICT, timeout=timeout_s)
    return assemble(data, scale)


def ocr_render(render: PageRender, settings: OcrSettings) -> OcrText:
    """OCR the render as it is, without orientation detection.

    Raises RuntimeError when tesseract runs past settings.page_timeout_s.
    """
    return read_image(prepare(render, settings), render.dpi, render.scale, settings,
                      settings.page_timeout_s)


def vertical_share(result: OcrText) -> float:
    """Share of words of three characters or more whose box is taller than wide.

    Tesseract reads a page turned a quarter one way by itself (it turns vertical text lines),
    so its text can be right while every box runs down the page; upright text has none.
    """
    boxes = [e.bbox for e in result.elements
             if e.kind == "word" and e.bbox and e.char_end - e.char_start >= 3]
    if not boxes:
        return 0.0
    return sum(1 for x0, y0, x1, y1 in boxes if y1 - y0 > x1 - x0) / len(boxes)


def looks_misoriented(result: OcrText, settings: OcrSettings) -> bool:
    """Whether an OCR result is worth an orientation check (see OcrSettings.osd_below_confidence)."""
    if result.confidence is None:  # no words: nothing for OSD to work on either
        return False
    return (result.confidence < settings.osd_below_confidence
            or vertical_share(result) > settings.osd_vertical_share)


def detect_turn(image: Image.Image, dpi: int, settings: OcrSettings, timeout_s: float) -> int:
    """Clockwise degrees (0, 90, 180, 270) that make the page upright, by tesseract's OSD.

    0 when OSD is not confident enough, and when it cannot tell: too little text makes
    tesseract raise, which here means "keep the page as it is", not an error.
    """
    try:
        osd = pytesseract.image_to_osd(image, config=f"--dpi {dpi}",
                                       output_type=pytesseract.Output.DICT, timeout=timeout_s)
    except pytesseract.TesseractError as exc:
        if "Too few characters" in str(exc):
            log.debug("orientation not detected (too little text)")
        else:  # e.g. osd.traineddata missing (Debian: tesseract-ocr-osd); the page is kept as read
            log.warning("orientation detection failed, page kept as read: %s", exc)
        return 0
    turn = int(osd.get("rotate", 0)) % 360
    if turn not in (90, 180, 270) or osd.get("orientation_conf", 0.0) < settings.osd_min_confidence:
        return 0
    return turn


# clockwise degrees → the PIL transpose that turns the image that far (PIL's ROTATE_* are
# counter-clockwise); a transpose moves pixels exactly, so tesseract reads the same glyphs
_TURNS = {90: Image.Transpose.ROTATE_270, 180: Image.Transpose.ROTATE_180,
          270: Image.Transpose.ROTATE_90}


def read_upright(render: PageRender, settings: OcrSettings) -> tuple[OcrText, int]:
    """OCR the render, turned upright when it was scanned sideways or upside down.

    Returns the result and the clockwise turn applied to the render (0, 90, 180 or 270). The
    word and line boxes are in the coordinates of the image as it was read — turned, when the
    turn is not 0 (width and height swap for 90 and 270) — so `ParsedPage.rotation` says how
    to map them back onto the render. The page is read as it is first; only a result that
    looks wrong runs OSD, and a turned page is OCRed again: the result with the higher mean
    confidence is kept (the turned one on a tie, its boxes run along the lines). OSD and the
    second OCR share the page's time budget (settings.page_timeout_s): running out there keeps
    the first result. Raises RuntimeError when the first OCR runs past the budget.
    """
    deadline = time.monotonic() + settings.page_timeout_s
    image = prepare(render, settings)
    first = read_image(image, render.dpi, render.scale, settings, settings.page_timeout_s)
    if not looks_misoriented(first, settings):
        return first, 0
    try:
        turn = detect_turn(image, render.dpi, settings, _left(deadline))
        if not turn:
            return first, 0
        second = read_image(image.transpose(_TURNS[turn]), render.dpi, render.scale, settings,
                            _left(deadline))
    except RuntimeError as exc:  # the page's time ran out; what was read upright stands
        log.warning("orientation check of page %d stopped, page kept as read: %s",
                    render.page_no, exc)
        return first, 0
    if (second.confidence or 0.0) >= (first.confidence or 0.0):
        log.info("page %d read after a %d° clockwise turn (confidence %.2f → %.2f)",
                 render.page_no, turn, first.confidence or 0.0, second.confidence or 0.0)
        return second, turn
    return first, 0


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0.5:  # pytesseract reads 0 as "no limit"
        raise RuntimeError("no time left for the page")
    return left


def ocr_page(render: PageRender, settings: OcrSettings) -> ParsedPage:
    """OCR one rendered page into a ParsedPage that records the engine and its confidence.

    `rotation` is the render's own (PDF /Rotate, EXIF orientation) plus the turn OCR applied,
    clockwise; width, height and element boxes are those of the page as read (`read_upright`).
    """
    turn = 0
    try:
        result, turn = read_upright(render, settings)
        empty_reason = None if result.text else "OCR found no words on the page"
    except pytesseract.TesseractError:
        raise  # tesseract itself failed (e.g. a missing language): a setup error, not a page's
    except RuntimeError as exc:  # pytesseract's timeout; the other pages of the document go on
        log.warning("OCR of page %d stopped: %s", render.page_no, exc)
        result = OcrText(text="", elements=[], confidence=None)
        empty_reason = f"OCR stopped after {settings.page_timeout_s} s"
    width, height = (render.height, render.width) if turn in (90, 270) else (render.width, render.height)
    return ParsedPage(
        page_no=render.page_no, raw_text=result.text, normalized_text=normalize_text(result.text),
        parser=f"tesseract/{settings.language}", parser_version=f"tesseract-{tesseract_version()}",
        ocr_confidence=result.confidence, width=width, height=height,
        dpi=render.dpi, rotation=float((render.rotation + turn) % 360), elements=result.elements,
        empty_reason=empty_reason,
    )


def ocr_pages(renders: Iterable[PageRender], settings: OcrSettings) -> list[ParsedPage]:
    """OCR pages in parallel (settings.workers threads), keeping page order.

    Renders are pulled lazily and at most two per worker are in flight, so a long scanned
    document never holds all its page images in memory; the caller's thread does the
    rendering (pymupdf is not thread-safe) while the pool runs tesseract.
    """
    workers = max(1, settings.workers)
    if settings.tesseract_threads > 0:
        # tesseract reads its OpenMP limit from the environment it inherits; pytesseract offers
        # no other channel, so the setting is applied here, where the processes are started.
        os.environ["OMP_THREAD_LIMIT"] = str(settings.tesseract_threads)
    pages: list[ParsedPage] = []
    in_flight: deque[Future[ParsedPage]] = deque()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ocr") as pool:
        for render in renders:
            in_flight.append(pool.submit(ocr_page, render, settings))
            if len(in_flight) >= 2 * workers:
                pages.append(in_flight.popleft().result())
        pages.extend(f.result() for f in in_flight)
    log.info("OCR of %d page(s) with %d worker(s), language %s", len(pages), workers, settings.language)
    return pages
