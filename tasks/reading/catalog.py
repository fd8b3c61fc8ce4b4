"""What the reading room knows of one published generation: its current revisions, their pages,
chunks and element boxes — read through tasks/store and kept (a generation never changes).

Revisions and pages are read whole once (small: one row per revision and per page); chunks and
elements are read per revision, on demand, and kept in a bounded cache.
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.generation import GenerationManifest
from tasks.access.policy import AccessClass, access_of
from tasks.access.validity import ValidityWindow
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table, read_revision_rows
from tasks.store.manifests import read_manifest

PAGE_JOINER = "\n\n"  # how a document's raw text joins its pages (tasks/ingest/chunk.py)
IMAGE_MEDIA_TYPES = {"image/png", "image/jpeg", "image/tiff"}
PDF_MEDIA_TYPE = "application/pdf"
ALTO_MEDIA_TYPE = "application/alto+xml"
PER_REVISION_CACHE = 64


@dataclass(frozen=True)
class RevisionInfo:
    revision_id: str
    source_id: str
    doc_id: str
    uri: str
    corpus: str | None
    date: str | None
    title: str | None
    tenant: str | None
    groups: tuple[str, ...]
    digest: str
    size: int
    media_type: str
    acquired_at: str
    metadata_json: str = "{}"  # what the delivery or its sidecar said (schemas.lineage.Revision)

    def page_image_service(self, page_no: int) -> str | None:
        """The library's IIIF Image service for a page the delivery has no image of: metadata
        `page_images` = {"<page_no>": "<Image API base URI>"} (a Gallica package names
        `…/iiif/ark:/12148/<ark>/f<n>`). Only http(s) addresses are taken."""
        try:
            named = json.loads(self.metadata_json or "{}").get("page_images") or {}
        except (ValueError, AttributeError):
            return None
        uri = named.get(str(page_no)) if isinstance(named, dict) else None
        if isinstance(uri, str) and uri.startswith(("https://", "http://")) and len(uri) < 2000:
            return uri.rstrip("/")
        return None


@dataclass(frozen=True)
class PageInfo:
    page_no: int
    parser: str
    parser_version: str
    width: float | None
    height: float | None
    dpi: int | None
    rotation: float | None
    ocr_confidence: float | None
    raw_text: str
    offset: int  # where this page's raw text starts in the document's raw text
    empty_reason: str | None


@dataclass(frozen=True)
class ChunkInfo:
    chunk_id: str
    ordinal: int
    char_start: int
    char_end: int
    page_start: int
    page_end: int
    n_tokens: int
    spans: tuple[tuple[int, tuple[float, ...] | None], ...]  # (page_no, bbox in page units)

    def bbox_on(self, page_no: int) -> tuple[float, ...] | None:
        return next((b for p, b in self.spans if p == page_no and b), None)


@dataclass(frozen=True)
class ElementInfo:
    kind: str
    char_start: int  # into the page's raw text
    char_end: int
    bbox: tuple[float, float, float, float] | None
    confidence: float | None


@dataclass
class Catalog:
    generation: str
    manifest: GenerationManifest
    revisions: dict[str, RevisionInfo]  # current revisions only
    current: dict[str, str]  # doc_id → current revision_id
    pages: dict[str, list[PageInfo]]  # revision_id → pages in order
    access: pa.Table  # revision_id, doc_id, tenant, groups, valid_from, valid_to: the access input
    validity: ValidityWindow  # each current revision's validity interval (the time rule)
    access_classes: tuple[np.ndarray, list[AccessClass]]  # `access_of(access)`, kept: it never changes
    _layout: StoreLayout = field(repr=False)
    _chunks: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _elements: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def load(cls, layout: StoreLayout, generation: str) -> "Catalog":
        revs = read_lineage_table(layout, generation, "revisions")
        revs = revs.filter(pc.equal(revs["is_current"], True))
        revisions = {}
        for r in revs.to_pylist():
            revisions[r["revision_id"]] = RevisionInfo(
                revision_id=r["revision_id"], source_id=r["source_id"], doc_id=r["doc_id"],
                uri=r["uri"], corpus=r["corpus"], date=r["date"], title=r["title"],
                tenant=r["tenant"], groups=tuple(r["groups"] or ()), digest=r["digest"],
                size=r["size"], media_type=r["media_type"], acquired_at=str(r["acquired_at"]),
                metadata_json=r.get("metadata_json") or "{}")
        pages_table = read_lineage_table(layout, generation, "pages")
        pages: dict[str, list[PageInfo]] = {}
        for p in sorted(pages_table.to_pylist(), key=lambda p: (p["revision_id"], p["page_no"])):
            if p["revision_id"] not in revisions:
                continue
            listed = pages.setdefault(p["revision_id"], [])
            offset = listed[-1].offset + len(listed[-1].raw_text) + len(PAGE_JOINER) if listed else 0
            listed.append(PageInfo(
                page_no=p["page_no"], parser=p["parser"], parser_version=p["parser_version"],
                width=p["width"], height=p["height"],
                dpi=int(p["dpi"]) if p["dpi"] is not None else None, rotation=p["rotation"],
                ocr_confidence=p["ocr_confidence"], raw_text=p["raw_text"] or "", offset=offset,
                empty_reason=p["empty_reason"]))
        access = revs.select(["revision_id", "doc_id", "tenant", "groups", "valid_from", "valid_to"])
        return cls(generation=generation, manifest=read_manifest(layout, generation),
                   revisions=revisions, current={r.doc_id: r.revision_id for r in revisions.values()},
                   pages=pages, access=access, validity=ValidityWindow.of(access),
                   access_classes=access_of(access), _layout=layout)

    def page(self, revision_id: str, page_no: int) -> PageInfo | None:
        return next((p for p in self.pages.get(revision_id, []) if p.page_no == page_no), None)

    def raw_text(self, revision_id: str) -> str:
        return PAGE_JOINER.join(p.raw_text for p in self.pages.get(revision_id, []))

    def chunks(self, revision_id: str) -> list[ChunkInfo]:
        return self._cached(self._chunks, revision_id, self._read_chunks)

    def chunk(self, revision_id: str, chunk_id: str) -> ChunkInfo | None:
        return next((c for c in self.chunks(revision_id) if c.chunk_id == chunk_id), None)

    def elements(self, revision_id: str) -> dict[int, list[ElementInfo]]:
        """Element boxes by page number, in reading order."""
        return self._cached(self._elements, revision_id, self._read_elements)

    def _cached(self, cache: OrderedDict, revision_id: str, read):
        with self._lock:
            if revision_id in cache:
                cache.move_to_end(revision_id)
                return cache[revision_id]
        value = read(revision_id)
        with self._lock:
            cache[revision_id] = value
            while len(cache) > PER_REVISION_CACHE:
                cache.popitem(last=False)
        return value

    def _read_chunks(self, revision_id: str) -> list[ChunkInfo]:
        rows = read_revision_rows(self._layout, self.generation, "chunks", revision_id,
                                  ["chunk_id", "ordinal", "char_start", "char_end", "page_start",
                                   "page_end", "n_tokens", "spans_json"]).to_pylist()
        out = []
        for c in sorted(rows, key=lambda c: c["ordinal"]):
            spans = tuple((s["page_no"], tuple(s["bbox"]) if s.get("bbox") else None)
                          for s in json.loads(c["spans_json"] or "[]"))
            out.append(ChunkInfo(chunk_id=c["chunk_id"], ordinal=c["ordinal"],
                                 char_start=c["char_start"], char_end=c["char_end"],
                                 page_start=c["page_start"], page_end=c["page_end"],
                                 n_tokens=c["n_tokens"], spans=spans))
        return out

    def _read_elements(self, revision_id: str) -> dict[int, list[ElementInfo]]:
        rows = read_revision_rows(self._layout, self.generation, "elements", revision_id,
                                  ["page_id", "ordinal", "kind", "char_start", "char_end", "bbox",
                                   "confidence"]).to_pylist()
        by_page: dict[int, list[ElementInfo]] = {}
        for e in sorted(rows, key=lambda e: (e["page_id"], e["ordinal"])):
            page_no = int(e["page_id"].rsplit("-p", 1)[1])
            bbox = tuple(e["bbox"]) if e["bbox"] and len(e["bbox"]) == 4 else None
            by_page.setdefault(page_no, []).append(ElementInfo(
                kind=e["kind"], char_start=e["char_start"], char_end=e["char_end"], bbox=bbox,
                confidence=e["confidence"]))
        return by_page
