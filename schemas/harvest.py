"""Harvesting Gallica: what to fetch (a request), how politely (settings), what came of it (a report).

A request names one of three things Gallica's documented services answer for:
- an issue ARK (`ark:/12148/bpt6k…`): that issue;
- a title ARK (`ark:/12148/cb…`) with a date range: the issues the `Issues` service lists for
  each year of the range, kept inside the range;
- an SRU query (CQL): the issues the `SRU` search service returns.
"""
from __future__ import annotations

import calendar
import re
import datetime as dt
from datetime import date

from pydantic import BaseModel, Field, model_validator

NAAN = "12148"  # the BnF's name assigning authority
# ARK names are letters and digits (the last one a check character); a qualifier may follow
# (`/date`, `/date1887`, `/f3`), which Gallica's own links carry.
# A link pasted from the viewer may end in `.item`, `/f3.item` or a query (`?rk=…`).
_ARK = re.compile(r"^(?:https?://[^/]+/(?:iiif/)?)?ark:/12148/([a-z0-9]+)(?:\.[A-Za-z]+)?"
                  r"(?:/([A-Za-z0-9.]*))?/?(?:\?.*)?$")
_ARK_IN_TEXT = re.compile(r"ark:/12148/([a-z0-9]+)")
_DATE_QUALIFIER = re.compile(r"^date(\d{4})?(\d{2})?(\d{2})?$")


class GallicaSettings(BaseModel):
    """Where Gallica is and how politely it is asked (MABILLON_GALLICA__…)."""

    base_url: str = "https://gallica.bnf.fr"
    # At most one request a second by default (the BnF asks harvesters for moderation); every
    # request, from every service, waits for this gap after the previous one started.
    min_interval_s: float = Field(1.0, ge=0)
    # Named in the User-Agent, so the library can reach whoever runs the harvest.
    contact: str = "https://github.com/mabillon (no contact configured)"
    # A server error (5xx), a malformed answer or a dropped connection is tried again this many
    # times, waiting backoff_s × 2^attempt; then the issue is quarantined with the reason.
    retries: int = Field(3, ge=0)
    backoff_s: float = Field(2.0, ge=0)
    # 429 and 503 answers are waited out (Retry-After, or backoff when absent) this many times;
    # a Retry-After longer than max_wait_s is waited for max_wait_s only.
    throttled_retries: int = Field(6, ge=0)
    max_wait_s: float = Field(900.0, ge=0)
    timeout_s: float = Field(60.0, gt=0)
    sru_page_size: int = Field(50, ge=1, le=50)  # the SRU service answers at most 50 a page

    def user_agent(self, version: str) -> str:
        return f"Mabillon/{version} (archival ingest harvester; contact: {self.contact})"


def ark_name(reference: str) -> str:
    """`bpt6k4616238h` from an ARK, a Gallica URL or the bare name."""
    found = _ARK.match(reference.strip())
    if found:
        return found.group(1)
    if re.fullmatch(r"[a-z0-9]+", reference.strip()):
        return reference.strip()
    raise ValueError(f"{reference!r} is not a Gallica ARK (ark:/12148/NAME)")


def arks_in(text: str) -> list[str]:
    """The ARK names a free text holds (a dc:identifier, a relation "Notice du catalogue : …")."""
    return _ARK_IN_TEXT.findall(text)


def is_gallica_reference(text: str) -> bool:
    """True for what `mabillon ingest` harvests instead of reading a path: an ARK of the BnF,
    a gallica.bnf.fr link to one, or `sru:QUERY`."""
    return text.startswith("sru:") or bool(_ARK.match(text.strip()))


class HarvestRequest(BaseModel):
    """One harvest: an issue ARK, a title ARK with a date range, or an SRU query."""

    ark: str | None = Field(None, description="an issue ARK (ark:/12148/bpt6k…) or a title ARK "
                                              "(ark:/12148/cb…, with date_from and date_to)")
    date_from: date | None = Field(None, description="first issue date of a title ARK's range")
    date_to: date | None = Field(None, description="last issue date of a title ARK's range")
    sru_query: str | None = Field(None, description="a CQL query for Gallica's SRU service, e.g. "
                                                    "dc.title all \"Le Gaulois\" and gallicapublication_date>=\"1887\"")

    @model_validator(mode="after")
    def _one_thing(self) -> "HarvestRequest":
        if (self.ark is None) == (self.sru_query is None):
            raise ValueError("a harvest names either an ARK or an SRU query, not both or neither")
        if self.ark is not None:
            self.ark = f"ark:/{NAAN}/{ark_name(self.ark)}"
            if self.is_title and (self.date_from is None or self.date_to is None):
                raise ValueError(f"{self.ark} is a title (a cb… ARK): give the issue dates to harvest "
                                 "(--from and --to, or the ARK's /dateYYYY form)")
        elif self.date_from or self.date_to:
            raise ValueError("a date range goes with a title ARK (ark:/12148/cb…), not an SRU query: "
                             "put the dates in the query (gallicapublication_date)")
        if self.ark is not None and not self.is_title and (self.date_from or self.date_to):
            raise ValueError(f"{self.ark} is one issue: a date range goes with a title ARK (ark:/12148/cb…)")
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise ValueError(f"date range {self.date_from} → {self.date_to} is empty")
        return self

    @property
    def is_title(self) -> bool:
        return self.ark is not None and ark_name(self.ark).startswith("cb")

    @classmethod
    def from_reference(cls, text: str, date_from: date | None = None,
                       date_to: date | None = None) -> "HarvestRequest":
        """A request from what a person types: `ark:/12148/bpt6k…`, a gallica.bnf.fr link,
        `ark:/12148/cb…/date1887` (Gallica's own year link; `/date18870115` a day) or
        `sru:QUERY`."""
        text = text.strip()
        if text.startswith("sru:"):
            return cls(sru_query=text[4:].strip(), date_from=date_from, date_to=date_to)
        found = _ARK.match(text)
        if not found:
            raise ValueError(f"{text!r} is not a Gallica reference (ark:/12148/NAME or sru:QUERY)")
        qualifier = _DATE_QUALIFIER.match(found.group(2) or "")
        if qualifier and qualifier.group(1) and date_from is None and date_to is None:
            year, month, day = (int(g) if g else None for g in qualifier.groups())
            if month and day:
                date_from = date_to = date(year, month, day)
            elif month:
                date_from, date_to = date(year, month, 1), _month_end(year, month)
            else:
                date_from, date_to = date(year, 1, 1), date(year, 12, 31)
        return cls(ark=found.group(1), date_from=date_from, date_to=date_to)

    def describe(self) -> str:
        if self.sru_query is not None:
            return f"SRU query {self.sru_query!r}"
        if self.is_title:
            return f"title {self.ark}, issues {self.date_from} → {self.date_to}"
        return f"issue {self.ark}"


def _month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


class IssueRef(BaseModel):
    """An issue found by discovery: its ARK name and, where the service said, its date."""

    ark: str  # ark:/12148/bpt6k…
    date: dt.date | None = None


class HarvestedIssue(BaseModel):
    ark: str
    folder: str  # the package folder, in the home, handed to the release
    date: dt.date | None = None
    title: str | None = None
    pages: int
    fetched: int  # requests this run made for it
    cached: int  # answers this run took from the cache instead


class QuarantinedIssue(BaseModel):
    ark: str
    reason: str


class HarvestReport(BaseModel):
    request: HarvestRequest
    issues: list[HarvestedIssue] = Field(default_factory=list)
    quarantined: list[QuarantinedIssue] = Field(default_factory=list)
    requests: int = 0  # answers fetched from Gallica this run (discovery included)
    from_cache: int = 0

    @property
    def folders(self) -> list[str]:
        return [issue.folder for issue in self.issues]
