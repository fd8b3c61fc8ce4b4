"""Per-revision caches, so a rerun (after a crash, or with new sources) skips finished work."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from schemas.embedding import EmbeddingSpace
from schemas.lineage import ParsedDocument
from tasks.store.atomic import atomic_write_parquet, atomic_write_text
from tasks.store.layout import StoreLayout


def load_parsed(layout: StoreLayout, revision_id: str, parse_key: str) -> ParsedDocument | None:
    path = layout.parsed_dir(revision_id) / f"{parse_key}.json"
    if not path.exists():
        return None
    return ParsedDocument.model_validate_json(path.read_text("utf-8"))


def save_parsed(layout: StoreLayout, doc: ParsedDocument, parse_key: str) -> None:
    atomic_write_text(layout.parsed_dir(doc.revision_id) / f"{parse_key}.json", doc.model_dump_json())


def load_vectors(layout: StoreLayout, space_id: str, segmenter_id: str,
                 revision_id: str) -> tuple[list[str], np.ndarray] | None:
    path = layout.vectors_cache(space_id, segmenter_id, revision_id)
    if not path.exists():
        return None
    table = pq.read_table(path)
    vecs = table["vector"].combine_chunks()
    dim = vecs.type.list_size
    arr = vecs.values.to_numpy(zero_copy_only=False).reshape(-1, dim).astype(np.float32)
    return table["chunk_id"].to_pylist(), arr


def save_vectors(layout: StoreLayout, space_id: str, segmenter_id: str, revision_id: str,
                 chunk_ids: list[str], vectors: np.ndarray) -> None:
    dim = vectors.shape[1]
    table = pa.table({
        "chunk_id": pa.array(chunk_ids, pa.string()),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim),
    })
    atomic_write_parquet(layout.vectors_cache(space_id, segmenter_id, revision_id), table)


def load_space(layout: StoreLayout, key: str) -> EmbeddingSpace | None:
    path = layout.staging / "spaces" / f"{key}.json"
    return EmbeddingSpace.model_validate_json(path.read_text("utf-8")) if path.exists() else None


def save_space(layout: StoreLayout, key: str, space: EmbeddingSpace) -> None:
    atomic_write_text(layout.staging / "spaces" / f"{key}.json", space.model_dump_json())
