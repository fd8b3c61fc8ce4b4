"""Merge (the release's *stage* step): the full tables of the next generation, from the serving
one and this run.

A run adds to the sources of the serving generation: sources it did not touch are carried over
(chunks and vectors included, not recomputed); sources it changed get their new revision, and
the old revision stays in the revisions table, marked not current.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict

from schemas.embedding import EmbeddingSpace
from schemas.generation import Parsed, TombstoneList
from schemas.settings import EmbeddingSettings
from tasks.embedding import load_embedder, space_cache_key
from tasks.ingest.ocr_quality import OcrQuality, ocr_quality
from tasks.store.cache import load_space, save_space
from tasks.store.generation_io import read_generation
from tasks.store.lance_store import tagged_generations
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import lineage_generations
from tasks.store.manifests import next_generation_id
from tasks.store.routing import read_routing
from tasks.store.tombstones import read_tombstones
from tasks.task_wrapper import as_task
from schemas.lineage import (CHUNK_SCHEMA, ELEMENT_SCHEMA, PAGE_SCHEMA, REVISION_SCHEMA,
                             SOURCE_SCHEMA, VECTOR_LINEAGE_SCHEMA, Chunk, ParsedDocument, Revision,
                             chunk_table_schema, spans_to_json)


@dataclass
class StagedGeneration:
    sources: pa.Table
    revisions: pa.Table
    pages: pa.Table
    elements: pa.Table
    chunks: pa.Table  # CHUNK_SCHEMA, row-aligned with vectors
    vectors: np.ndarray
    space: EmbeddingSpace
    generation: str | None = None  # the id it is published under (None: the serving one as read)

    def current_revision_ids(self) -> set[str]:
        return set(self.sources["current_revision_id"].to_pylist())

    def lance_table(self) -> pa.Table:
        flat = pa.array(self.vectors.reshape(-1), pa.float32())
        vec = pa.FixedSizeListArray.from_arrays(flat, self.space.dim)
        return self.chunks.append_column("vector", vec).cast(chunk_table_schema(self.space.dim))

    def lineage_tables(self) -> dict[str, pa.Table]:
        return {"sources": self.sources, "revisions": self.revisions, "pages": self.pages,
                "elements": self.elements, "chunks": self.chunks, "vectors": vector_lineage(self)}


def empty_generation(space: EmbeddingSpace) -> StagedGeneration:
    return StagedGeneration(
        sources=SOURCE_SCHEMA.empty_table(), revisions=REVISION_SCHEMA.empty_table(),
        pages=PAGE_SCHEMA.empty_table(), elements=ELEMENT_SCHEMA.empty_table(),
        chunks=CHUNK_SCHEMA.empty_table(), vectors=np.zeros((0, space.dim), np.float32), space=space,
    )


def vector_lineage(staged: StagedGeneration) -> pa.Table:
    digests = [hashlib.sha256(v.tobytes()).hexdigest()[:32] for v in staged.vectors]
    return pa.table({
        "chunk_id": staged.chunks["chunk_id"],
        "space_id": pa.array([staged.space.space_id] * len(digests), pa.string()),
        "vector_digest": pa.array(digests, pa.string()),
        "norm": pa.array(np.linalg.norm(staged.vectors, axis=1) if len(digests) else [], pa.float32()),
    }, schema=VECTOR_LINEAGE_SCHEMA)


# ---- contracts → Arrow ---------------------------------------------------------------------

def revisions_table(revisions: list[Revision], current: bool = True) -> pa.Table:
    rows = [{**r.model_dump(exclude={"metadata_json"}), "metadata_json": r.metadata_json,
             "is_current": current} for r in revisions]
    return pa.Table.from_pylist(rows, schema=REVISION_SCHEMA)


def pages_and_elements(docs: list[ParsedDocument]) -> tuple[pa.Table, pa.Table]:
    pages, elements = [], []
    for doc in docs:
        for p in doc.pages:
            page_id = f"{doc.revision_id}-p{p.page_no:04d}"
            pages.append({
                "page_id": page_id, "revision_id": doc.revision_id, "page_no": p.page_no,
                "parser": p.parser, "parser_version": p.parser_version,
                "ocr_confidence": p.ocr_confidence, "width": p.width, "height": p.height,
                "dpi": p.dpi, "rotation": p.rotation, "raw_text": p.raw_text,
                "normalized_text": p.normalized_text, "n_elements": len(p.elements),
                "empty_reason": p.empty_reason or (None if p.raw_text.strip() else "no text on page"),
            })
            for i, el in enumerate(p.elements):
                elements.append({
                    "element_id": f"{page_id}-e{i:05d}", "page_id": page_id,
                    "revision_id": doc.revision_id, "ordinal": i, "kind": el.kind,
                    "char_start": el.char_start, "char_end": el.char_end,
                    "bbox": list(el.bbox) if el.bbox else None, "confidence": el.confidence,
                })
    return (pa.Table.from_pylist(pages, schema=PAGE_SCHEMA),
            pa.Table.from_pylist(elements, schema=ELEMENT_SCHEMA))


def chunks_table(chunks: list[Chunk], revisions: dict[str, Revision],
                 quality: dict[str, OcrQuality] | None = None) -> pa.Table:
    """Chunk rows; `quality` (revision id → its document's OCR quality) fills ocr_quality."""
    rows = []
    quality = quality or {}
    for c in chunks:
        r = revisions[c.revision_id]
        q = quality.get(c.revision_id)
        rows.append({
            "chunk_id": c.chunk_id, "revision_id": c.revision_id, "source_id": r.source_id,
            "doc_id": c.doc_id, "corpus": r.corpus, "date": r.date, "tenant": r.tenant,
            "groups": r.groups, "ordinal": c.ordinal, "text": c.text, "n_tokens": c.n_tokens,
            "char_start": c.char_start, "char_end": c.char_end, "page_start": c.page_start,
            "page_end": c.page_end, "spans_json": spans_to_json(c.spans), "segmenter": c.segmenter,
            "valid_from": r.valid_from, "valid_to": r.valid_to,
            "ocr_quality": q.value if q else None, "ocr_quality_source": q.source if q else None,
        })
    return pa.Table.from_pylist(rows, schema=CHUNK_SCHEMA)


# ---- merge -----------------------------------------------------------------------------------

def _drop_revisions(table: pa.Table, revision_ids: set[str]) -> pa.Table:
    if not revision_ids or table.num_rows == 0:
        return table
    keep = pc.invert(pc.is_in(table["revision_id"], value_set=pa.array(sorted(revision_ids))))
    return table.filter(keep)


def merge_generation(base: StagedGeneration, new_revisions: list[Revision], pages: pa.Table,
                     elements: pa.Table, chunks: pa.Table, vectors: np.ndarray,
                     generation: str, space: EmbeddingSpace) -> StagedGeneration:
    """Replace the current revision of each source this run touched; keep everything else."""
    touched = {r.source_id: r for r in new_revisions}
    base_sources = {row["source_id"]: row for row in base.sources.to_pylist()}
    replaced = {base_sources[s]["current_revision_id"] for s in touched if s in base_sources}
    # Revisions reprocessed under an unchanged id (e.g. a new embedding space) are replaced too.
    replaced |= {r.revision_id for r in new_revisions}

    keep_chunks = pc.invert(pc.is_in(base.chunks["revision_id"], value_set=pa.array(sorted(replaced), pa.string()))) \
        if base.chunks.num_rows else pa.array([], pa.bool_())
    kept_chunks = base.chunks.filter(keep_chunks) if base.chunks.num_rows else base.chunks
    kept_vectors = base.vectors[np.asarray(keep_chunks, dtype=bool)] if base.chunks.num_rows else base.vectors

    old_revs = base.revisions
    if old_revs.num_rows:
        flags = pc.invert(pc.is_in(old_revs["revision_id"], value_set=pa.array(sorted(replaced), pa.string())))
        flags = pc.and_(flags, old_revs["is_current"])
        old_revs = old_revs.set_column(old_revs.schema.get_field_index("is_current"), "is_current", flags)
        # a revision seen again (same bytes) is not listed twice
        dup = pc.is_in(old_revs["revision_id"], value_set=pa.array([r.revision_id for r in new_revisions], pa.string()))
        old_revs = old_revs.filter(pc.invert(dup))

    sources = dict(base_sources)
    for sid, r in touched.items():
        prev = sources.get(sid)
        sources[sid] = {
            "source_id": sid, "doc_id": r.doc_id, "uri": r.uri, "corpus": r.corpus,
            "tenant": r.tenant, "groups": r.groups, "current_revision_id": r.revision_id,
            "first_generation": prev["first_generation"] if prev else generation,
        }
    return StagedGeneration(
        sources=pa.Table.from_pylist(sorted(sources.values(), key=lambda s: s["source_id"]), schema=SOURCE_SCHEMA),
        revisions=pa.concat_tables([old_revs, revisions_table(new_revisions)]),
        pages=pa.concat_tables([_drop_revisions(base.pages, replaced), pages]),
        elements=pa.concat_tables([_drop_revisions(base.elements, replaced), elements]),
        chunks=pa.concat_tables([kept_chunks, chunks]),
        vectors=np.concatenate([kept_vectors, vectors]) if len(kept_vectors) else vectors,
        space=space,
    )


def revision_from_row(row: dict) -> Revision:
    row = {k: v for k, v in row.items() if k != "is_current"}
    return Revision.model_validate(row)


def metadata(row: dict) -> dict:
    return json.loads(row.get("metadata_json") or "{}")


def load_serving(layout: StoreLayout, space: EmbeddingSpace) -> tuple[str | None, StagedGeneration, str | None]:
    serving = read_routing(layout).serving
    if serving is None:
        return None, empty_generation(space), None
    manifest, tables, vectors = read_generation(layout, serving)
    base = StagedGeneration(sources=tables["sources"], revisions=tables["revisions"], pages=tables["pages"],
                            elements=tables["elements"], chunks=tables["chunks"], vectors=vectors,
                            space=manifest.embedding_space)
    return serving, base, manifest.space_id


def remove_sources(staged: StagedGeneration, source_ids: set[str]) -> StagedGeneration:
    """The generation without these sources: no revisions, pages, chunks or vectors of them."""
    ids = pa.array(sorted(source_ids), pa.string())
    gone_revs = staged.revisions.filter(pc.is_in(staged.revisions["source_id"], value_set=ids))
    revs = set(gone_revs["revision_id"].to_pylist())
    keep = pc.invert(pc.is_in(staged.chunks["source_id"], value_set=ids)) if staged.chunks.num_rows else None
    return StagedGeneration(
        sources=staged.sources.filter(pc.invert(pc.is_in(staged.sources["source_id"], value_set=ids))),
        revisions=staged.revisions.filter(pc.invert(pc.is_in(staged.revisions["source_id"], value_set=ids))),
        pages=_drop_revisions(staged.pages, revs), elements=_drop_revisions(staged.elements, revs),
        chunks=staged.chunks.filter(keep) if keep is not None else staged.chunks,
        vectors=staged.vectors[np.asarray(keep, dtype=bool)] if keep is not None else staged.vectors,
        space=staged.space,
    )


# ---- the release's start and its stage step --------------------------------------------------

@dataclass
class Base:
    """What a release starts from: the serving generation (if any) and the configured space."""

    serving: str | None
    tables: StagedGeneration
    space_id: str | None  # the serving generation's space
    space: EmbeddingSpace  # the configured model's space
    tombstones: TombstoneList = field(default_factory=TombstoneList)  # deleted: never served again

    @property
    def tombstoned(self) -> set[str]:
        return self.tombstones.doc_ids

    def current_revisions(self) -> list[Revision]:
        return [revision_from_row(r) for r in self.tables.revisions.to_pylist() if r["is_current"]]


def serving_base(layout: StoreLayout, embedding: EmbeddingSettings) -> Base:
    """The serving generation, and the configured space without loading the model when the
    space was seen before (an unchanged re-ingest then never loads it)."""
    key = space_cache_key(embedding)
    space = load_space(layout, key)
    if space is None:
        space = load_embedder(embedding).space
        save_space(layout, key, space)
    serving, tables, space_id = load_serving(layout, space)
    return Base(serving=serving, tables=tables, space_id=space_id, space=space,
                tombstones=read_tombstones(layout))


class StagingInput(BaseModel):
    """The stage step's input: what the run parsed, chunked and embedded, and the base it goes on."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    base: Base
    revisions: list[Revision]  # the run's revisions to process (those parsed replace theirs)
    parsed: Parsed
    chunks: list[Chunk]
    vectors: np.ndarray  # row-aligned with chunks
    space: EmbeddingSpace
    layout: StoreLayout


def stage(job: StagingInput) -> StagedGeneration:
    """The next generation's tables under its new id: the parsed revisions replace theirs."""
    base, parsed, layout = job.base, job.parsed, job.layout
    processed = [r for r in job.revisions if r.revision_id in parsed.documents]
    generation = next_generation_id(layout, [*tagged_generations(layout), *lineage_generations(layout)])
    pages, elements = pages_and_elements([parsed.documents[r.revision_id] for r in processed])
    quality = {r.revision_id: ocr_quality(parsed.documents[r.revision_id], r.metadata_json)
               for r in processed}
    staged = merge_generation(base.tables, processed, pages, elements,
                              chunks_table(job.chunks, {r.revision_id: r for r in processed}, quality),
                              job.vectors, generation, job.space)
    staged = without_tombstoned(staged, read_tombstones(layout).doc_ids)
    staged.generation = generation
    return staged


def without_tombstoned(staged: StagedGeneration, tombstoned: set[str]) -> StagedGeneration:
    """Deleted documents are never staged again. The list is read afresh, not taken from the
    run's start: a deletion masked while this release ran (it never waits for the release
    slot), or one whose new generation is still to come, is left out of what this release
    publishes. (A deletion masked after this step is masked at query time, and the release
    settles it as it lets the slot go: flows/settle_deletions.py.)"""
    dead = {s for s, d in zip(staged.sources["source_id"].to_pylist(), staged.sources["doc_id"].to_pylist())
            if d in tombstoned}
    return remove_sources(staged, dead) if dead else staged


stage_task = as_task(stage, "stage")
