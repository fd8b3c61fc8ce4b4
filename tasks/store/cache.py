"""Per-revision caches, so a rerun (after a crash, or with new sources) skips finished work."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from schemas.embedding import EmbeddingSpace
from schemas.lineage import ParsedDocument
from tasks.store.layout import StoreLayout


def _parsed_name(parse_key: str, page: int | None) -> str:
    # the whole document, or one page of it (a long scan is parsed page by page: a run killed
    # in the middle of it resumes at the first page not cached)
    return f"{parse_key}.json" if page is None else f"{parse_key}-p{page:05d}.json"


def load_parsed(layout: StoreLayout, revision_id: str, parse_key: str,
                page: int | None = None) -> ParsedDocument | None:
    location = layout.parsed_dir(revision_id) / _parsed_name(parse_key, page)
    if not location.exists():
        return None
    return ParsedDocument.model_validate_json(location.read_bytes())


def save_parsed(layout: StoreLayout, doc: ParsedDocument, parse_key: str,
                page: int | None = None) -> None:
    (layout.parsed_dir(doc.revision_id) / _parsed_name(parse_key, page)).write_text(doc.model_dump_json())


def drop_parsed_pages(layout: StoreLayout, revision_id: str, parse_key: str, pages: list[int]) -> None:
    """Once the whole document is cached, its page-by-page copies are not needed."""
    for page in pages:
        location = layout.parsed_dir(revision_id) / _parsed_name(parse_key, page)
        if location.exists():
            location.unlink()


def load_vectors(layout: StoreLayout, space_id: str, segmenter_id: str,
                 revision_id: str) -> tuple[list[str], np.ndarray] | None:
    location = layout.vectors_cache(space_id, segmenter_id, revision_id)
    if not location.exists():
        return None
    table = location.read_parquet()
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
    layout.vectors_cache(space_id, segmenter_id, revision_id).write_parquet(table)


def load_space(layout: StoreLayout, key: str) -> EmbeddingSpace | None:
    location = layout.space_cache(key)
    return EmbeddingSpace.model_validate_json(location.read_bytes()) if location.exists() else None


def save_space(layout: StoreLayout, key: str, space: EmbeddingSpace) -> None:
    layout.space_cache(key).write_text(space.model_dump_json())


def _chosen(name: str, keep: set[str], only: set[str] | None) -> bool:
    return name not in keep and (only is None or name in only)


def remove_cached_revisions(layout: StoreLayout, keep: set[str], only: set[str] | None = None) -> int:
    """Parsed documents and vectors cached for revisions not in `keep` (given `only`, just those
    of its revisions): how many revision folders and vector files were removed."""
    removed = 0
    for rev_dir in layout.parsed_root.subfolders():
        if _chosen(rev_dir.name, keep, only):
            rev_dir.remove_tree()
            removed += 1
    for cached in layout.vectors_root.files():
        if cached.name.endswith(".parquet") and _chosen(cached.stem, keep, only):
            cached.unlink()
            removed += 1
    return removed


def remove_encoders(layout: StoreLayout, keep_spaces: set[str]) -> int:
    """Compiled query encoders of embedding spaces not in `keep_spaces`: how many were removed."""
    gone = [folder for folder in layout.encoders.subfolders() if folder.name not in keep_spaces]
    for folder in gone:
        folder.remove_tree()
    return len(gone)
