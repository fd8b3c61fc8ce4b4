"""The reading room's addresses, in one place: pages, IIIF services, manifests, canvases.

Prefect artifacts link here too (flows/artifacts/links.py), through `settings.reading_room.url`.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote, urlencode


# A viewer that opens a IIIF Content State given as `iiif-content` (Content State API 1.0 §3).
IIIF_VIEWER = "https://projectmirador.org/embed/?iiif-content="


def xywh(box: tuple[float, float, float, float]) -> str:
    """A box (x0, y0, x1, y1, canvas pixels) as the `x,y,w,h` of a IIIF/Media Fragments
    `#xywh=` (whole pixels covering the box)."""
    x0, y0, x1, y1 = box
    return f"{int(x0)},{int(y0)},{max(1, round(x1 - int(x0)))},{max(1, round(y1 - int(y0)))}"


@dataclass(frozen=True)
class Links:
    """Addresses of the reading room; with `as_of`, addresses of what it showed at that time.

    A page keeps its time as `?as_of=`; an IIIF resource keeps it in its path
    (`/at/<as_of>/iiif/...`), because a IIIF client builds image addresses by appending to a
    service id and would drop or mangle a query string.
    """
    base: str  # e.g. http://127.0.0.1:4300, without a trailing slash
    as_of: str | None = None  # ISO 8601, as the request or the query record named it

    @classmethod
    def at(cls, base: str, as_of: datetime | str | None = None) -> "Links":
        when = as_of.isoformat() if isinstance(as_of, datetime) else (as_of or None)
        return cls(base.rstrip("/"), when)

    @property
    def iiif(self) -> str:
        return f"{self.base}/at/{quote(self.as_of, safe='')}" if self.as_of else self.base

    def _timed(self, url: str) -> str:
        return f"{url}?{urlencode({'as_of': self.as_of})}" if self.as_of else url

    def image_id(self, revision_id: str, page_no: int) -> str:
        return f"{revision_id}-p{page_no:04d}"

    def image_service(self, revision_id: str, page_no: int) -> str:
        return f"{self.iiif}/iiif/3/{self.image_id(revision_id, page_no)}"

    def image(self, revision_id: str, page_no: int, region: str = "full", size: str = "max",
              fmt: str = "jpg") -> str:
        return f"{self.image_service(revision_id, page_no)}/{region}/{size}/0/default.{fmt}"

    def image_region(self, revision_id: str, page_no: int, box: tuple[float, float, float, float]) -> str:
        """The cited words' region as a fragment of the page's image address (what a reference
        pins: `…/iiif/3/<revision>-p0001#xywh=x,y,w,h`, canvas pixels = the image's pixels)."""
        return f"{self.image_service(revision_id, page_no)}#xywh={xywh(box)}"

    def viewer(self, content_state: str) -> str:
        """A IIIF viewer opened on an encoded content state (tasks/reading/content_state.py)."""
        return f"{IIIF_VIEWER}{content_state}"

    def manifest(self, revision_id: str) -> str:
        return f"{self.iiif}/iiif/manifest/{revision_id}"

    def query_manifest(self, query_id: str) -> str:
        return f"{self.iiif}/iiif/query/{query_id}/manifest"

    def canvas(self, revision_id: str, page_no: int) -> str:
        return f"{self.base}/iiif/canvas/{revision_id}/p{page_no}"

    def annotation_page(self, owner: str, name: str) -> str:
        return f"{self.base}/iiif/annotations/{owner}/{name}"

    def document(self, doc_id: str) -> str:
        return self._timed(f"{self.base}/documents/{quote(doc_id, safe='/')}")

    def export_query(self, fmt: str, query_id: str, rank: int | None = None) -> str:
        """The answer's references as a file (ris, bibtex, csl-json, csv), or only the one of its
        document at `rank`: flows/reading_room.py."""
        url = self._timed(f"{self.base}/export/{fmt}/queries/{quote(query_id, safe='')}")
        return url if rank is None else f"{url}{'&' if '?' in url else '?'}rank={rank}"

    def export_document(self, fmt: str, doc_id: str) -> str:
        return self._timed(f"{self.base}/export/{fmt}/documents/{quote(doc_id, safe='/')}")

    def evidence(self, query_id: str, rank: int | None = None) -> str:
        return self._timed(f"{self.base}/queries/{query_id}") + (f"#doc-{rank}" if rank is not None else "")

