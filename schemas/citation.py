"""A reference to one cited document: what a colleague needs to find and verify it.

One definition; tasks/cite renders it as RIS, BibTeX, CSL-JSON and a CSV row. A reference is
made only from what its principal may see now (tasks/cite/references.py): a deleted, embargoed
or other tenant's document never becomes one.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

ExportFormat = Literal["ris", "bibtex", "csl-json", "csv"]
EXPORT_FORMATS: tuple[str, ...] = ("ris", "bibtex", "csl-json", "csv")
# what each format is served as, and the file name ending a reference manager expects
MEDIA_TYPES = {"ris": "application/x-research-info-systems; charset=utf-8",
               "bibtex": "application/x-bibtex; charset=utf-8",
               "csl-json": "application/vnd.citationstyles.csl+json; charset=utf-8",
               "csv": "text/csv; charset=utf-8"}
SUFFIXES = {"ris": "ris", "bibtex": "bib", "csl-json": "json", "csv": "csv"}


class Reference(BaseModel):
    """One cited document, pinned to the bytes, generation and place it was cited from."""

    key: str = Field(description="citation key, unique within one export (ASCII)")
    rank: int = Field(ge=1, description="place in the ranked list (1 for a single document)")
    doc_id: str
    title: str = Field(description="the document's title; its id when it has none")
    container: str | None = Field(None, description="the newspaper or collection it belongs to")
    corpus: str | None = None
    date: str | None = Field(None, description="as recorded: ISO 8601 (YYYY, YYYY-MM or YYYY-MM-DD)")
    identifier: str | None = Field(None, description="the library's identifier: an ARK where there is one")
    page: int | None = Field(None, description="the page of the cited words")
    region: str | None = Field(None, description="the cited words' box on that page: xywh=x,y,w,h")
    image: str | None = Field(None, description="the page's image address, with #xywh= when boxed")
    generation: str = Field(description="the index generation answered from, by name (g0003)")
    revision: str | None = Field(None, description="the cited revision")
    digest: str | None = Field(None, description="sha256 of the cited revision's bytes")
    link: str = Field(description="stable link to the evidence (or the document) in the reading room")
    status: str | None = Field(None, description="accepted | held | retrieved; None for a document")
    quote: str | None = Field(None, description="the cited words")
    question: str | None = None
    note: str | None = Field(None, description="what changed since it was cited, when anything did")

    def verification(self) -> str:
        """The pins in one line, for formats without a field of their own for each."""
        parts = [f"generation {self.generation}"]
        parts += [f"revision {self.revision}"] if self.revision else []
        parts += [f"sha256 {self.digest}"] if self.digest else []
        parts += [f"page {self.page}"] if self.page is not None else []
        parts += [self.region] if self.region else []
        parts += [f"image {self.image}"] if self.image else []
        parts += [self.note] if self.note else []
        return "; ".join(parts)
