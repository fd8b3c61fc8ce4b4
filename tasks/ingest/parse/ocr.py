"""OCR: tesseract on a page render → raw text with line and word boxes and confidences.

Tesseract runs in this process, through its C++ API (tesserocr): the render's pixels are handed
over in memory, the language model is loaded once per engine and the engine is reused from page
to page, so a page costs tesseract's own recognition and little else — no image file written
and read back, no process started and no model loaded per page, no TSV to parse (see
docs/benchmarks.md, "Parsing and OCR"). tesserocr releases the GIL while tesseract works, so
page workers are threads of this process (`ocr_pages`), each holding its own engine.

Raw text is built from tesseract's own layout: words joined by spaces, lines by a newline,
paragraphs and blocks by a blank line, so each element's offsets point into that raw text.

Pages scanned sideways or upside down are turned before they are read (`read_upright`): the
render is OCRed as it is first, and only a result that looks wrong (low confidence, or words
running down the page) pays for tesseract's orientation detection and a second OCR.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tesserocr

from schemas.lineage import Element, ParsedPage
from schemas.settings import OcrSettings
from tasks.ingest.parse.errors import OCR_STOPPED
from tasks.ingest.parse.normalize import normalize_text
from tasks.ingest.render import PageRender

log = logging.getLogger(__name__)

# Where Debian (tesseract-ocr-fra / -osd), Ubuntu, Fedora and Homebrew put the language data.
# The PyPI wheel of tesserocr bundles the library but no language data.
TESSDATA_DIRS = ("/usr/share/tesseract-ocr/5/tessdata", "/usr/share/tesseract-ocr/4.00/tessdata",
                 "/usr/share/tessdata", "/usr/share/tesseract/tessdata", "/usr/local/share/tessdata",
                 "/opt/homebrew/share/tessdata")
OSD_LANGUAGE = "osd"
# The page budget's clock, a module seam so a test can spend the budget without waiting it out.
clock = time.monotonic
# Rows of pixels median-filtered at once: a band of the page stays in the CPU cache between
# the filter's passes (16 rows: 13 ms for an A4 page at 300 dpi, 3× faster than whole-page passes).
_DENOISE_BAND = 16



class OcrUnavailable(Exception):
    """Tesseract cannot run here (language data missing, engine failing to start): a setup
    error for every page, not a property of one page."""


class PageTimeout(Exception):
    """Tesseract stopped recognising a page at its time budget."""


@dataclass(frozen=True)
class OcrWord:
    """One recognised word, in tesseract's reading order, with the layout it sits in."""

    block: int
    paragraph: int
    line: int
    text: str
    box: tuple[int, int, int, int]  # left, top, right, bottom, in pixels of the image read
    confidence: float  # tesseract's 0–100


@dataclass(frozen=True)
class OcrText:
    text: str
    elements: list[Element]  # per line ("line") then its words ("word"), in reading order
    confidence: float | None  # mean word confidence weighted by word length, 0–1


@functools.cache
def tesseract_version() -> str:
    """The version of the tesseract library this process runs (e.g. "5.5.4")."""
    return tesserocr.tesseract_version().split()[1]


@functools.cache
def tessdata_dir(configured: str | None, language: str) -> str:
    """The folder holding `<language>.traineddata` for every language of `language`
    (e.g. "fra" or "fra+eng"), with the trailing slash tesseract wants."""
    needed = [name.lstrip("~") for name in language.split("+")]
    candidates = [configured] if configured else list(TESSDATA_DIRS)
    for folder in map(Path, candidates):
        if all((folder / f"{name}.traineddata").is_file() for name in needed):
            return f"{folder}/"
    where = configured or ", ".join(TESSDATA_DIRS)
    raise OcrUnavailable(
        f"tesseract language data {'+'.join(needed)} not found in {where}: install the Debian "
        f"packages tesseract-ocr-fra and tesseract-ocr-osd (deploy/install-system-packages.sh) "
        f"or set MABILLON_OCR__TESSDATA to the folder holding the .traineddata files")


class EnginePool:
    """Tesseract engines kept for the life of the process and lent to one thread at a time.

    Loading a language model costs about 0.1 s; an engine is made the first time a thread needs
    one while all others are lent, and reused by every later page and document, whichever pool
    thread or Dask task asks. At most as many engines exist per (data, language, mode) as pages
    were ever read at once, so memory follows the worker count.
    """

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str, int], list[tesserocr.PyTessBaseAPI]] = {}
        self._lock = threading.Lock()

    @contextmanager
    def lend(self, path: str, language: str, psm: int) -> Iterator[tesserocr.PyTessBaseAPI]:
        key = (path, language, psm)
        with self._lock:
            idle = self._idle.setdefault(key, [])
            engine = idle.pop() if idle else None
        if engine is None:
            try:
                engine = tesserocr.PyTessBaseAPI(path=path, lang=language, psm=psm)
            except RuntimeError as exc:
                raise OcrUnavailable(f"tesseract could not start with {language} from {path}: "
                                     f"{exc}") from None
        try:
            yield engine
        finally:
            engine.Clear()  # drop the page's image and results; the model stays loaded
            with self._lock:
                self._idle[key].append(engine)

    def idle(self) -> int:
        """Engines made so far and not lent out now."""
        with self._lock:
            return sum(len(engines) for engines in self._idle.values())


ENGINES = EnginePool()


def denoise(pixels: np.ndarray) -> np.ndarray:
    """3×3 median filter of a greyscale image, edges replicated: the same pixels as PIL's
    ImageFilter.MedianFilter(3) in milliseconds instead of 0.2–0.9 s (PIL's rank filter slows
    with grain, exactly where it is needed).

    Each column of three is sorted once (low ≤ mid ≤ high); the median of the nine is then the
    median of (highest low, median of mids, lowest high) over three neighbouring columns.
    """
    padded = np.pad(pixels, 1, mode="edge")
    out = np.empty_like(pixels)
    for y in range(0, pixels.shape[0], _DENOISE_BAND):
        rows = padded[y:min(y + _DENOISE_BAND, pixels.shape[0]) + 2]
        top, mid, bottom = rows[:-2], rows[1:-1], rows[2:]
        low, high = np.minimum(top, mid), np.maximum(top, mid)
        middle = np.minimum(high, bottom)
        np.maximum(high, bottom, out=high)
        middle, low = np.maximum(low, middle), np.minimum(low, middle)
        lows = np.maximum(np.maximum(low[:, :-2], low[:, 1:-1]), low[:, 2:])
        highs = np.minimum(np.minimum(high[:, :-2], high[:, 1:-1]), high[:, 2:])
        out[y:y + len(lows)] = _median3(lows, _median3(middle[:, :-2], middle[:, 1:-1], middle[:, 2:]),
                                        highs)
    return out


def _median3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def prepare(render: PageRender, settings: OcrSettings) -> np.ndarray:
    """The pixels tesseract reads: the greyscale render, median-filtered when settings.denoise."""
    image = render.image if render.image.mode == "L" else render.image.convert("L")
    pixels = np.asarray(image)
    return denoise(pixels) if settings.denoise else np.ascontiguousarray(pixels)


def _hand_over(engine: tesserocr.PyTessBaseAPI, pixels: np.ndarray, dpi: int) -> None:
    height, width = pixels.shape
    engine.SetImageBytes(pixels.tobytes(), width, height, 1, width)
    engine.SetSourceResolution(dpi)


def words_of(engine: tesserocr.PyTessBaseAPI) -> list[OcrWord]:
    """The recognised words in reading order, numbered by block, paragraph and line as
    tesseract's TSV output numbers them."""
    iterator = engine.GetIterator()
    words: list[OcrWord] = []
    if iterator is None:
        return words
    block = paragraph = line = 0
    word_level = tesserocr.RIL.WORD
    for word in tesserocr.iterate_level(iterator, word_level):
        if word.IsAtBeginningOf(tesserocr.RIL.BLOCK):
            block, paragraph, line = block + 1, 0, 0
        if word.IsAtBeginningOf(tesserocr.RIL.PARA):
            paragraph, line = paragraph + 1, 0
        if word.IsAtBeginningOf(tesserocr.RIL.TEXTLINE):
            line += 1
        if word.Empty(word_level):
            continue
        text = (word.GetUTF8Text(word_level) or "").strip()
        if text:
            words.append(OcrWord(block=block, paragraph=paragraph, line=line, text=text,
                                 box=word.BoundingBox(word_level),
                                 confidence=word.Confidence(word_level)))
    return words


def _union(boxes: Sequence[tuple[float, float, float, float]]) -> tuple[float, float, float, float]:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes))


def assemble(words: Iterable[OcrWord], scale: float) -> OcrText:
    """Turn tesseract's words into raw text and elements.

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

    for word in words:
        par = (word.block, word.paragraph)
        line = par + (word.line,)
        if previous_line is not None:
            separator = " " if line == previous_line else ("\n" if par == previous_par else "\n\n")
            if line != previous_line:
                close_line()
            parts.append(separator)
            length += len(separator)
        previous_par, previous_line = par, line
        left, top, right, bottom = word.box
        confidence = word.confidence / 100.0 if word.confidence >= 0 else None
        line_words.append(Element(kind="word", char_start=length, char_end=length + len(word.text),
                                  bbox=(left * scale, top * scale, right * scale, bottom * scale),
                                  confidence=confidence))
        parts.append(word.text)
        length += len(word.text)
        if confidence is not None:
            weighted += confidence * len(word.text)
            chars += len(word.text)
    close_line()
    return OcrText(text="".join(parts), elements=elements,
                   confidence=weighted / chars if chars else None)


def read_image(pixels: np.ndarray, dpi: int, scale: float, settings: OcrSettings,
               timeout_s: float) -> OcrText:
    """OCR already prepared pixels. Raises PageTimeout when tesseract stops at timeout_s.

    The budget is tesseract's own deadline, checked as it recognises words; its layout analysis
    before that cannot be interrupted in process (a page of pure grain, never denoised, spent
    36 s there), which is what the default denoise prevents.
    """
    path = tessdata_dir(settings.tessdata, settings.language)
    with ENGINES.lend(path, settings.language, settings.page_segmentation) as engine:
        _hand_over(engine, pixels, dpi)
        if not engine.Recognize(max(1, int(timeout_s * 1000))):
            raise PageTimeout(f"tesseract stopped at the page's time budget ({timeout_s:g} s)")
        return assemble(words_of(engine), scale)


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


def detect_turn(pixels: np.ndarray, dpi: int, settings: OcrSettings) -> int:
    """Clockwise degrees (0, 90, 180, 270) that make the page upright, by tesseract's OSD.

    0 when OSD is not confident enough, and when it cannot tell (too little text), which here
    means "keep the page as it is", not an error. OSD looks at a bounded number of characters
    (a few hundred), so it takes a fraction of a reading even on a dense page.
    """
    path = tessdata_dir(settings.tessdata, OSD_LANGUAGE)
    with ENGINES.lend(path, OSD_LANGUAGE, tesserocr.PSM.OSD_ONLY) as engine:
        _hand_over(engine, pixels, dpi)
        osd = engine.DetectOrientationScript()
    if not osd:
        log.debug("orientation not detected (too little text)")
        return 0
    # OSD reports how far the image is turned clockwise; turning it back is the rest of a circle
    turn = (360 - int(osd["orient_deg"])) % 360
    if turn not in (90, 180, 270) or osd["orient_conf"] < settings.osd_min_confidence:
        return 0
    return turn


def turned(pixels: np.ndarray, clockwise: int) -> np.ndarray:
    """The pixels turned `clockwise` degrees (90, 180, 270); exact, so tesseract reads the same
    glyphs (np.rot90 turns counter-clockwise for positive k)."""
    return np.ascontiguousarray(np.rot90(pixels, k=-(clockwise // 90)))


def read_upright(render: PageRender, settings: OcrSettings) -> tuple[OcrText, int]:
    """OCR the render, turned upright when it was scanned sideways or upside down.

    Returns the result and the clockwise turn applied to the render (0, 90, 180 or 270). The
    word and line boxes are in the coordinates of the image as it was read — turned, when the
    turn is not 0 (width and height swap for 90 and 270) — so `ParsedPage.rotation` says how
    to map them back onto the render. The page is read as it is first; only a result that
    looks wrong runs OSD, and a turned page is OCRed again: the result with the higher mean
    confidence is kept (the turned one on a tie, its boxes run along the lines). OSD and the
    second OCR share the page's time budget (settings.page_timeout_s): running out there keeps
    the first result. Raises PageTimeout when the first OCR runs past the budget.
    """
    deadline = clock() + settings.page_timeout_s
    pixels = prepare(render, settings)
    first = read_image(pixels, render.dpi, render.scale, settings, settings.page_timeout_s)
    if not looks_misoriented(first, settings):
        return first, 0
    try:
        _left(deadline)
        turn = detect_turn(pixels, render.dpi, settings)
        if not turn:
            return first, 0
        second = read_image(turned(pixels, turn), render.dpi, render.scale, settings,
                            _left(deadline))
    except PageTimeout as exc:  # the page's time ran out; what was read upright stands
        log.warning("orientation check of page %d stopped, page kept as read: %s",
                    render.page_no, exc)
        return first, 0
    if (second.confidence or 0.0) >= (first.confidence or 0.0):
        log.info("page %d read after a %d° clockwise turn (confidence %.2f → %.2f)",
                 render.page_no, turn, first.confidence or 0.0, second.confidence or 0.0)
        return second, turn
    return first, 0


def _left(deadline: float) -> float:
    left = deadline - clock()
    if left <= 0.5:  # not enough for another pass over the page
        raise PageTimeout("no time left for the page")
    return left


def ocr_page(render: PageRender, settings: OcrSettings) -> ParsedPage:
    """OCR one rendered page into a ParsedPage that records the engine and its confidence.

    `rotation` is the render's own (PDF /Rotate, EXIF orientation) plus the turn OCR applied,
    clockwise; width, height and element boxes are those of the page as read (`read_upright`).
    Raises OcrUnavailable when tesseract cannot run at all (a setup error, not the page's).
    """
    turn = 0
    try:
        result, turn = read_upright(render, settings)
        empty_reason = None if result.text else "OCR found no words on the page"
    except PageTimeout as exc:  # the other pages of the document go on
        log.warning("OCR of page %d stopped: %s", render.page_no, exc)
        result = OcrText(text="", elements=[], confidence=None)
        empty_reason = f"{OCR_STOPPED} {settings.page_timeout_s:g} s"
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
    rendering (pymupdf is not thread-safe) while the pool runs tesseract, which releases the
    GIL, one engine per thread (`EnginePool`).
    """
    workers = max(1, settings.workers)
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
