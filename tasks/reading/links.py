"""The reading room's addresses, in one place: pages, IIIF services, manifests, canvases.

Prefect artifacts link here too (flows/artifacts/links.py), through `settings.reading_room.url`.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote



@dataclass(frozen=True)
class Links:
    base: str  # e.g. http://127.0.0.1:4300, without a trailing slash

    @classmethod
    def at(cls, base: str) -> "Links":
        return cls(base.rstrip("/"))

    def image_id(self, revision_id: str, page_no: int) -> str:
        return f"{revision_id}-p{page_no:04d}"

    def image_service(self, revision_id: str, page_no: int) -> str:
        return f"{self.base}/iiif/3/{self.image_id(revision_id, page_no)}"

    def image(self, revision_id: str, page_no: int, region: str = "full", size: str = "max",
              fmt: str = "jpg") -> str:
        return f"{self.image_service(revision_id, page_no)}/{region}/{size}/0/default.{fmt}"

    def manifest(self, revision_id: str) -> str:
        return f"{self.base}/iiif/manifest/{revision_id}"

    def query_manifest(self, query_id: str) -> str:
        return f"{self.base}/iiif/query/{query_id}/manifest"

    def canvas(self, revision_id: str, page_no: int) -> str:
        return f"{self.base}/iiif/canvas/{revision_id}/p{page_no}"

    def annotation_page(self, owner: str, name: str) -> str:
        return f"{self.base}/iiif/annotations/{owner}/{name}"

    def document(self, doc_id: str) -> str:
        return f"{self.base}/documents/{quote(doc_id, safe='/')}"

    def evidence(self, query_id: str, rank: int | None = None) -> str:
        return f"{self.base}/queries/{query_id}" + (f"#doc-{rank}" if rank is not None else "")

