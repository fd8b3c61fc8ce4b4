"""Articles (and issue-level pages) of an issue package: the record acquisition built from the
METS and its ALTO pages, read into pages of text with line and word boxes.

Text is assembled as the ALTO parser does (words by spaces, lines by newlines, blocks by a blank
line, a line-end HYP kept as "-"), in the order the METS names the blocks; each page keeps the
issue's own page number, its size in pixels, and the article's word confidence on it.
"""
from __future__ import annotations

from pydantic import ValidationError

from schemas.lineage import Element, ParsedDocument, ParsedPage, Revision
from schemas.package import ArticlePage, ArticleRecord
from schemas.settings import ParseSettings
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.normalize import normalize_text

PARSER_VERSION = "mets-alto-1"


def read_article_page(part: ArticlePage) -> ParsedPage:
    parts: list[str] = []
    elements: list[Element] = []
    length = 0
    weighted = chars = 0.0

    def add(text: str) -> None:
        nonlocal length
        parts.append(text)
        length += len(text)

    for block in part.blocks:
        first_line = True
        for line in block.lines:
            add(("\n\n" if parts else "") if first_line else "\n")
            first_line = False
            line_start, words = length, []
            for i, word in enumerate(line.words):
                if i:
                    add(" ")
                words.append(Element(kind="word", char_start=length, char_end=length + len(word.content),
                                     bbox=word.bbox, confidence=word.wc))
                add(word.content)
                if word.wc is not None:
                    weighted += word.wc * len(word.content)
                    chars += len(word.content)
            if line.hyphen:
                add(line.hyphen)
            known = [w.confidence for w in words if w.confidence is not None]
            elements.append(Element(kind="line", char_start=line_start, char_end=length, bbox=line.bbox,
                                    confidence=sum(known) / len(known) if known else None))
            elements.extend(words)
    text = "".join(parts)
    page = part.page
    return ParsedPage(page_no=page.page_no, raw_text=text, normalized_text=normalize_text(text), parser="mets-alto",
                      parser_version=PARSER_VERSION, ocr_confidence=weighted / chars if chars else page.pc,
                      width=page.width, height=page.height, elements=elements,
                      empty_reason=None if text else "no text in the blocks the METS names on this page")


def parse_article(data: bytes, revision: Revision, settings: ParseSettings) -> ParsedDocument:
    try:
        record = ArticleRecord.model_validate_json(data)
    except ValidationError as exc:
        raise ParseRefused(f"not an issue-package article record: {exc.error_count()} error(s)") from None
    return ParsedDocument(revision_id=revision.revision_id, pages=[read_article_page(p) for p in record.pages])
