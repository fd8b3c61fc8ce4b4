"""Revision, digest and page/box spans of served documents, read from a generation's Parquet
lineage once and kept per generation (a published generation never changes)."""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table


@dataclass(frozen=True)
class DocLineage:
    revision_id: str
    source_id: str
    digest: str
    title: str | None = None
    # OCR quality as delivered (issue packages: ALTO word confidence over the article), and the
    # document's own confidence on each page (page_no → 0–1): shown with the evidence; ranking
    # reads the chunk rows' `ocr_quality` instead (tasks/ingest/ocr_quality.py)
    ocr_confidence: float | None = None
    page_confidence: dict[int, float] | None = None


@dataclass(frozen=True)
class ChunkSpans:
    page: int | None
    bbox: list[float] | None


class LineageLookup:
    def __init__(self, docs: dict[str, DocLineage], chunks: dict[str, ChunkSpans]):
        self.docs = docs
        self.chunks = chunks

    @classmethod
    def load(cls, layout: StoreLayout, generation: str) -> "LineageLookup":
        rev = read_lineage_table(layout, generation, "revisions",
                                 ["revision_id", "source_id", "doc_id", "digest", "is_current", "title",
                                  "metadata_json"])
        current = {}
        for r in rev.to_pylist():
            if r["is_current"] or r["doc_id"] not in current:
                current[r["doc_id"]] = r
        confidence = page_confidences(layout, generation, {r["revision_id"] for r in current.values()})
        docs = {doc_id: DocLineage(r["revision_id"], r["source_id"], r["digest"], r["title"],
                                   ocr_of(r["metadata_json"]), confidence.get(r["revision_id"]))
                for doc_id, r in current.items()}
        ch = read_lineage_table(layout, generation, "chunks",
                                ["chunk_id", "page_start", "spans_json"])
        chunks = {}
        for cid, page, spans in zip(ch.column("chunk_id").to_pylist(),
                                    ch.column("page_start").to_pylist(),
                                    ch.column("spans_json").to_pylist()):
            first = (json.loads(spans) or [{}])[0] if spans else {}
            bbox = first.get("bbox")
            chunks[cid] = ChunkSpans(first.get("page_no", page), list(bbox) if bbox else None)
        return cls(docs, chunks)


def ocr_of(metadata_json: str | None) -> float | None:
    """The document's OCR confidence as its package delivered it (metadata `ocr.confidence`)."""
    try:
        value = json.loads(metadata_json or "{}").get("ocr", {}).get("confidence")
    except (ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def page_confidences(layout: StoreLayout, generation: str, revisions: set[str]) -> dict[str, dict[int, float]]:
    pages = read_lineage_table(layout, generation, "pages", ["revision_id", "page_no", "ocr_confidence"])
    out: dict[str, dict[int, float]] = {}
    for rid, page_no, conf in zip(pages.column("revision_id").to_pylist(), pages.column("page_no").to_pylist(),
                                  pages.column("ocr_confidence").to_pylist()):
        if conf is not None and rid in revisions:
            out.setdefault(rid, {})[page_no] = conf
    return out


_CACHE: dict[tuple[str, str], LineageLookup] = {}
_LOCK = threading.Lock()


def lineage_for(layout: StoreLayout, generation: str) -> LineageLookup:
    key = (str(layout.warehouse), generation)
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = LineageLookup.load(layout, generation)
        return _CACHE[key]
