"""OCR: tesseract on a page render → raw text with line and word boxes and confidences.

Raw text is built from tesseract's own layout: words joined by spaces, lines by a newline,
paragraphs and blocks by a blank line, so each element's offsets point into that raw text.
Pages are OCRed in a thread pool: pytesseract runs tesseract as a subprocess, so threads give
real parallelism without copying page images between processes.
"""
from __future__ import annotations

import functools
import logging
import os
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pytesseract
from PIL import ImageFilter

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


def ocr_render(render: PageRender, settings: OcrSettings) -> OcrText:
    """Raises RuntimeError when tesseract runs past settings.page_timeout_s."""
    image = render.image.filter(ImageFilter.MedianFilter(3)) if settings.denoise else render.image
    data = pytesseract.image_to_data(
        image, lang=settings.language, config=f"--psm {settings.page_segmentation} --dpi {render.dpi}",
        output_type=pytesseract.Output.DICT, timeout=settings.page_timeout_s)
    return assemble(data, render.scale)


def ocr_page(render: PageRender, settings: OcrSettings) -> ParsedPage:
    """OCR one rendered page into a ParsedPage that records the engine and its confidence."""
    try:
        result = ocr_render(render, settings)
        empty_reason = None if result.text else "OCR found no words on the page"
    except pytesseract.TesseractError:
        raise  # tesseract itself failed (e.g. a missing language): a setup error, not a page's
    except RuntimeError as exc:  # pytesseract's timeout; the other pages of the document go on
        log.warning("OCR of page %d stopped: %s", render.page_no, exc)
        result = OcrText(text="", elements=[], confidence=None)
        empty_reason = f"OCR stopped after {settings.page_timeout_s} s"
    return ParsedPage(
        page_no=render.page_no, raw_text=result.text, normalized_text=normalize_text(result.text),
        parser=f"tesseract/{settings.language}", parser_version=f"tesseract-{tesseract_version()}",
        ocr_confidence=result.confidence, width=render.width, height=render.height,
        dpi=render.dpi, rotation=float(render.rotation), elements=result.elements,
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
