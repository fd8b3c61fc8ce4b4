"""Issue packages (METS + ALTO, as national libraries deliver digitised newspapers) as documents.

A package is read once at acquisition; each logical article (and each page's text outside any
article) becomes an `ArticleRecord`, whose canonical JSON is the revision's bytes. The record
holds exactly what the document is built from — its part of the METS (title, authors, section,
the blocks it names in reading order) and the content of those blocks on its ALTO pages, with the
digests of those pages — so a corrected page changes only the records built from it, and the
same delivery again gives the same bytes (the same revision).
"""
from __future__ import annotations

from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

# Media type of one article (or issue-level page) of a package; its bytes are the record's JSON.
ARTICLE_MEDIA_TYPE = "application/vnd.mabillon.article+json"
RECORD_VERSION = 1

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels of the page image


class AltoWord(NamedTuple):
    """A String: stored as [content, box, confidence] (a page has thousands; a tuple is cheap)."""

    content: str
    bbox: Box | None = None
    wc: float | None = None  # ALTO word confidence, 0–1


class AltoLine(BaseModel):
    bbox: Box | None = None
    words: list[AltoWord]
    hyphen: str | None = None  # HYP at the line end, kept so normalisation can join the word


class AltoBlock(BaseModel):
    block_id: str
    bbox: Box | None = None
    lines: list[AltoLine]


class IssuePage(BaseModel):
    """One physical page of the issue, as its ALTO file describes it."""

    page_no: int  # 1-based physical order in the issue
    label: str | None = None  # the printed page number (ORDERLABEL), when the METS gives one
    file: str  # path of the ALTO file inside the package
    sha256: str  # of the ALTO bytes as delivered (gzipped or not)
    width: float | None = None  # pixels
    height: float | None = None
    unit: str = "pixel"  # the ALTO MeasurementUnit the boxes were converted from
    scale: float = 1.0  # pixels per ALTO unit
    pc: float | None = None  # ALTO page confidence (Page/@PC), 0–1
    ocr_brut: float | None = None  # BnF's "OCR BRUT nn %" processing note, in percent
    image_service: str | None = None  # IIIF Image API base URI of the page, when the package names one


class ArticlePage(BaseModel):
    page: IssuePage
    blocks: list[AltoBlock]  # in the order the METS names them


class ArticleRecord(BaseModel):
    """The bytes of one document of a package (canonical JSON, keys sorted)."""

    v: int = RECORD_VERSION
    kind: Literal["article", "outside_articles", "page"]
    doc_id: str
    corpus: str
    date: str | None = None
    title: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    pages: list[ArticlePage]
