"""Embed: chunks → vectors, one task per batch on the flow's task runner, cached per revision.

A batch holds whole revisions (about 4 × embedding.batch_size chunks); the task embeds them with
its process's model (a Dask worker loads it once, at its first batch) and caches each
revision's vectors at once, so a killed run resumes where it stopped. The task checks that its
model is the space the release records: a worker with other weights must not mix spaces.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from prefect.futures import as_completed

from schemas.embedding import EmbeddingSpaceMismatch
from schemas.lineage import Chunk
from schemas.settings import EmbeddingSettings
from tasks.embedding import load_embedder
from tasks.ingest.crash_points import crash_point
from tasks.progress import StageProgress
from tasks.store.cache import load_vectors, save_vectors
from tasks.store.layout import StoreLayout
from tasks.task_wrapper import as_task


@dataclass(frozen=True)
class EmbedBatch:
    revision_ids: list[str]
    chunk_ids: list[list[str]]  # per revision, in order
    texts: list[str]  # every chunk of the batch, revision after revision

    @property
    def size(self) -> int:
        return len(self.texts)


def batches(chunks: list[Chunk], revisions: list[str], by_rev: dict[str, list[int]],
            batch_chunks: int) -> list[EmbedBatch]:
    """Whole revisions grouped until a batch holds at least `batch_chunks` chunks."""
    out, group = [], []
    for n, rev in enumerate(revisions, start=1):
        group.append(rev)
        if sum(len(by_rev[r]) for r in group) < batch_chunks and n < len(revisions):
            continue
        out.append(EmbedBatch(revision_ids=list(group),
                              chunk_ids=[[chunks[i].chunk_id for i in by_rev[r]] for r in group],
                              texts=[chunks[i].text for r in group for i in by_rev[r]]))
        group = []
    return out


def embed_batch(batch: EmbedBatch, layout: StoreLayout, settings: EmbeddingSettings, space_id: str,
                segmenter_id: str) -> np.ndarray:
    """Vectors of the batch's chunks (row-aligned with batch.texts), each revision cached."""
    embedder = load_embedder(settings)
    if embedder.space.space_id != space_id:
        raise EmbeddingSpaceMismatch(
            f"this worker's {settings.model!r} is space {embedder.space.space_id}, the release's is "
            f"{space_id}: give every worker the same model weights")
    vectors = embedder.embed_documents(batch.texts)
    start = 0
    for rev, ids in zip(batch.revision_ids, batch.chunk_ids):
        save_vectors(layout, space_id, segmenter_id, rev, ids, vectors[start:start + len(ids)])
        start += len(ids)
    crash_point(layout, "embed")  # test hook: killed with some revisions cached
    return vectors


embed_batch_task = as_task(embed_batch, "embed", reads_storage=True)


def embed(chunks: list[Chunk], layout: StoreLayout, settings: EmbeddingSettings, space_id: str,
          segmenter_id: str) -> np.ndarray:
    """Vectors row-aligned with `chunks`: from the cache, or computed by batch tasks."""
    by_rev: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        by_rev.setdefault(c.revision_id, []).append(i)
    vectors = np.zeros((len(chunks), 0), np.float32)
    todo: list[str] = []
    cached: dict[str, np.ndarray] = {}
    for rev, idx in by_rev.items():
        hit = load_vectors(layout, space_id, segmenter_id, rev)
        if hit and hit[0] == [chunks[i].chunk_id for i in idx]:
            cached[rev] = hit[1]
        else:
            todo.append(rev)
    work = batches(chunks, todo, by_rev, max(1, settings.batch_size) * 4)
    computed: dict[str, np.ndarray] = {}
    with StageProgress("embed", sum(b.size for b in work), "chunk") as progress:
        futures = {embed_batch_task.submit(b, layout, settings, space_id, segmenter_id): b
                   for b in work}
        for future in as_completed(list(futures)):
            batch, out = futures[future], future.result()
            start = 0
            for rev, ids in zip(batch.revision_ids, batch.chunk_ids):
                computed[rev] = out[start:start + len(ids)]
                start += len(ids)
            progress.advance(batch.size)
    parts = {**cached, **computed}
    if not chunks:
        return vectors
    dim = next(iter(parts.values())).shape[1]
    vectors = np.zeros((len(chunks), dim), np.float32)
    for rev, idx in by_rev.items():
        vectors[idx] = parts[rev]
    return vectors
