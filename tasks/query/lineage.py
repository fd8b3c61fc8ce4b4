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
                                 ["revision_id", "source_id", "doc_id", "digest", "is_current"])
        docs = {}
        for r in rev.to_pylist():
            if r["is_current"] or r["doc_id"] not in docs:
                docs[r["doc_id"]] = DocLineage(r["revision_id"], r["source_id"], r["digest"])
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


_CACHE: dict[tuple[str, str], LineageLookup] = {}
_LOCK = threading.Lock()


def lineage_for(layout: StoreLayout, generation: str) -> LineageLookup:
    key = (str(layout.warehouse), generation)
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = LineageLookup.load(layout, generation)
        return _CACHE[key]
