"""Filters and pages over what a room page lists (evidence documents, the document list): by
corpus, by date (a year, a month or a day, either end open) and by words of the title, one page
of a bounded length at a time."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel, Field, field_validator

T = TypeVar("T")
_PARTIAL_DATE = re.compile(r"^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?$")


class ListFilter(BaseModel):
    """What a reader asked to see (the page's query string); a value that cannot be read is a
    400 that says which and how to write it, never a silent empty list."""

    corpus: str = Field("", max_length=200)
    date_from: str = Field("", max_length=10)
    date_to: str = Field("", max_length=10)
    q: str = Field("", max_length=200)
    accepted_only: bool = False
    page: int = Field(1, ge=1, le=100_000)
    as_of: str = Field("", max_length=64)  # a past view's time, carried along (read by the route)

    @field_validator("date_from", "date_to")
    @classmethod
    def _partial_date(cls, value: str) -> str:
        value = value.strip()
        if value and not (value.isascii() and _PARTIAL_DATE.match(value)):
            raise ValueError("write a year (1887), a month (1887-03) or a day (1887-03-14)")
        return value

    @property
    def active(self) -> bool:
        return bool(self.corpus or self.date_from or self.date_to or self.q or self.accepted_only)

    @classmethod
    def of(cls, params) -> "ListFilter":
        """From a query string's parameters (the last of a repeated one); unknown ones ignored;
        a value that cannot be read raises ValidationError."""
        known = {k: params[k] for k in cls.model_fields if k in params}
        if "accepted_only" in known:  # a checkbox: present is on, whatever its value
            known["accepted_only"] = known["accepted_only"] not in ("", "0", "false")
        return cls.model_validate(known)

    def query(self, **changes) -> str:
        """This filter as a query string, with `changes` (another page, say); empty values left out."""
        from urllib.parse import urlencode

        values = {**self.model_dump(), **changes}
        pairs = [(k, "1" if v is True else v) for k, v in values.items()
                 if v not in ("", None, False) and not (k == "page" and v == 1)]
        return "?" + urlencode(pairs) if pairs else "?"


def in_dates(date: str | None, date_from: str, date_to: str) -> bool:
    """Whether a document's date (ISO, possibly partial) falls in [date_from, date_to], each end
    compared at its own precision ('1887' takes every day of 1887). An undated document is in
    no range."""
    if not (date_from or date_to):
        return True
    if not date:
        return False
    if date_from and date[:len(date_from)] < date_from:
        return False
    if date_to and date[:len(date_to)] > date_to:
        return False
    return True


def folded(text: str) -> str:
    """Lower case without accents, for matching words as a reader types them."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def has_words(haystack: str, q: str) -> bool:
    """Every word of `q` is in `haystack` (accents and case ignored)."""
    hay = folded(haystack)
    return all(word in hay for word in folded(q).split())


@dataclass(frozen=True)
class Paged(Generic[T]):
    items: list[T]
    number: int  # 1-based
    pages: int
    total: int
    per_page: int

    @property
    def first_index(self) -> int:  # 1-based position of the first item shown
        return (self.number - 1) * self.per_page + 1 if self.items else 0


def paginate(items: list[T], number: int, per_page: int) -> Paged[T]:
    """One page of `items`; a page past the last shows the last."""
    pages = max(1, -(-len(items) // per_page))
    number = min(max(1, number), pages)
    start = (number - 1) * per_page
    return Paged(items[start:start + per_page], number, pages, len(items), per_page)
