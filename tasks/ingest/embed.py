"""Embed: chunks → vectors, cached per revision so that a killed run resumes where it stopped."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from schemas.lineage import Chunk
from schemas.settings import MabillonSettings
from tasks.embedding import Embedder
from tasks.ingest.chunk import ChunkingPlan
from tasks.progress import StageProgress
from tasks.store.cache import load_vectors, save_vectors
from tasks.store.layout import StoreLayout
from tasks.task_wrapper import as_task


def embed(chunks: list[Chunk], embedder: Embedder, plan: ChunkingPlan, layout: StoreLayout,
          settings: MabillonSettings, on_batch: Callable[[], None] | None = None) -> tuple[np.ndarray, int]:
    """Vectors row-aligned with `chunks`, and how many were computed (the rest from cache).

    Work is grouped by revision and each finished revision is cached at once, so a run killed
    mid-way resumes where it stopped.
    """
    space_id = embedder.space.space_id
    by_rev: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        by_rev.setdefault(c.revision_id, []).append(i)
    vectors = np.zeros((len(chunks), embedder.space.dim), np.float32)
    todo: list[str] = []
    for rev, idx in by_rev.items():
        cached = load_vectors(layout, space_id, plan.segmenter_id, rev)
        if cached and cached[0] == [chunks[i].chunk_id for i in idx]:
            vectors[idx] = cached[1]
        else:
            todo.append(rev)
    computed = 0
    batch_chunks = max(1, settings.embedding.batch_size) * 4
    with StageProgress("embed", sum(len(by_rev[r]) for r in todo), "chunk") as progress:
        group: list[str] = []
        for n, rev in enumerate(todo, start=1):
            group.append(rev)
            if sum(len(by_rev[r]) for r in group) < batch_chunks and n < len(todo):
                continue
            idx = [i for r in group for i in by_rev[r]]
            out = embedder.embed_documents([chunks[i].text for i in idx])
            vectors[idx] = out
            for r in group:
                save_vectors(layout, space_id, plan.segmenter_id, r,
                             [chunks[i].chunk_id for i in by_rev[r]], vectors[by_rev[r]])
            computed += len(idx)
            progress.advance(len(idx))
            group = []
            if on_batch:
                on_batch()
    return vectors, computed



embed_task = as_task(embed, "embed")
