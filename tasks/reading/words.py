"""The boxes of the words a citation covers on one page, found by character offsets.

OCR and ALTO pages record a box per word (elements of kind "word"). A digital PDF's text layer
records lines only; its words come from pymupdf's word list of the same page, placed inside
each line by finding them, in order, in that line's raw text. Where neither is possible, the
line boxes stand in for the words.
"""
from __future__ import annotations

from dataclasses import dataclass

from tasks.pdf_library import pymupdf

from tasks.reading.catalog import PDF_MEDIA_TYPE, ElementInfo, PageInfo


@dataclass(frozen=True)
class WordBox:
    char_start: int  # into the page's raw text
    char_end: int
    bbox: tuple[float, float, float, float]  # page units
    text: str


def page_range(page: PageInfo, char_start: int, char_end: int) -> tuple[int, int] | None:
    """A document-level character range as offsets into the page's raw text (None: not on it)."""
    start = max(char_start - page.offset, 0)
    end = min(char_end - page.offset, len(page.raw_text))
    return (start, end) if start < end else None


def text_layer_words(pdf: bytes, page: PageInfo, lines: list[ElementInfo]) -> list[WordBox]:
    """Words of text-layer lines, with offsets into the page's raw text."""
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        words = doc[page.page_no - 1].get_text("words", sort=True)
    out = []
    for line in lines:
        x0, y0, x1, y1 = line.bbox
        inside = sorted((w for w in words
                         if x0 - 1 <= (w[0] + w[2]) / 2 <= x1 + 1 and y0 - 1 <= (w[1] + w[3]) / 2 <= y1 + 1),
                        key=lambda w: w[0])
        cursor = line.char_start
        for wx0, wy0, wx1, wy1, text, *_ in inside:
            at = page.raw_text.find(text, cursor, line.char_end)
            if at < 0:
                continue
            out.append(WordBox(at, at + len(text), (wx0, wy0, wx1, wy1), text))
            cursor = at + len(text)
    return out


def page_words(page: PageInfo, elements: list[ElementInfo], media_type: str,
               blob: bytes | None = None) -> list[WordBox]:
    """Every word box of a page (lines stand in where no word boxes exist)."""
    words = [WordBox(e.char_start, e.char_end, e.bbox, page.raw_text[e.char_start:e.char_end])
             for e in elements if e.kind == "word" and e.bbox]
    if words:
        return words
    lines = [e for e in elements if e.kind == "line" and e.bbox]
    if media_type == PDF_MEDIA_TYPE and blob is not None and lines:
        words = text_layer_words(blob, page, lines)
        if words:
            return words
    return [WordBox(e.char_start, e.char_end, e.bbox, page.raw_text[e.char_start:e.char_end])
            for e in lines]


def cited_words(words: list[WordBox], start: int, end: int) -> list[WordBox]:
    """The words of a page-level range [start, end): every word it touches."""
    return [w for w in words if w.char_start < end and w.char_end > start]


def union(boxes: list[tuple[float, float, float, float]]) -> tuple[float, float, float, float] | None:
    if not boxes:
        return None
    return (min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes))
