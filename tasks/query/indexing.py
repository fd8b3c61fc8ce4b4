"""Build and check a generation's indexes: the vector index on its Lance version, scalar indexes
for the access prefilter, and the lexical postings under its index folder.

Publish calls `index_generation` on the new table version before tagging it, so the tag names a
version that carries its indexes; a purge that rewrites the version calls it again with the
recorded parameters. What was built, with which parameters and how long it took, is the
`IndexContract` in the generation manifest.
"""
from __future__ import annotations

import logging
import math
import time

import pyarrow as pa

from schemas.indexes import DenseIndex, IndexContract, IndexSettings, LexicalIndex
from schemas.retrieval import RetrievalSettings
from tasks.access.policy import access_of
from tasks.query.analysis import analyzer_id
from tasks.query.lexical_index import build_index
from tasks.store.location import Location

log = logging.getLogger(__name__)

# What the lexical index is built from: the texts, and the access columns its per-class
# document frequencies are counted by.
LEXICAL_COLUMNS = ["chunk_id", "text", "tenant", "groups"]

ANN_NAME = "vector_ann"
# PQ trains 256 centroids per sub-vector (8 bits); a smaller table (an index forced on a
# sample, as the tests do) gets 4-bit codes and one partition.
MIN_TRAIN_ROWS = 256
# Scalar indexes that let Lance evaluate the access filter (and corpus/date filters) without
# scanning the columns; built with the ANN index, where tables are large.
SCALAR = {"tenant": "BITMAP", "groups": "LABEL_LIST", "doc_id": "BTREE", "corpus": "BITMAP",
          "date": "BTREE"}


def lexical_folder(index_dir: Location, stem: bool, ngrams: int) -> Location:
    return index_dir / f"lexical-{analyzer_id(stem, ngrams)}"


def index_generation(lance_table, chunks: pa.Table, index_dir: Location, index: IndexSettings,
                     retrieval: RetrievalSettings, like: IndexContract | None = None) -> IndexContract:
    """Indexes for a freshly written version (`chunks`: its LEXICAL_COLUMNS, in row order).
    With `like`, the same algorithm and parameters as a previous contract."""
    dense = build_dense(lance_table, chunks.num_rows, index, like.dense if like else None)
    stem, ngrams = ((like.lexical.stem, like.lexical.char_ngrams) if like and like.lexical
                    else (retrieval.stem, retrieval.char_ngrams))
    lexical = build_lexical(index_dir, chunks, stem, ngrams)
    return IndexContract(dense=dense, lexical=lexical)


def build_lexical(index_dir: Location, chunks: pa.Table, stem: bool, ngrams: int) -> LexicalIndex:
    """The postings of `chunks` (LEXICAL_COLUMNS; without tenant and groups the index has one
    access class, exact but slower for restricted principals)."""
    folder = lexical_folder(index_dir, stem, ngrams)
    texts = (t for batch in chunks.column("text").chunks for t in batch.to_pylist())
    row_class = (access_of(chunks)[0] if {"tenant", "groups"} <= set(chunks.column_names) else None)
    info = build_index(folder, texts, chunks.column("chunk_id"), stem=stem, ngrams=ngrams,
                       row_class=row_class)
    log.info("lexical index %s: %d rows, %d terms, %d postings in %.1f s", folder, info.rows,
             info.terms, info.postings, info.build_s)
    return LexicalIndex(analyzer=analyzer_id(stem, ngrams), stem=stem, char_ngrams=ngrams,
                        path=folder.name, **info.model_dump())


def build_dense(lance_table, rows: int, settings: IndexSettings, like: DenseIndex | None = None) -> DenseIndex:
    """An ANN index when the generation is large enough (or `like` had one), else exact."""
    wanted = like.search == "ann" if like else rows >= settings.ann_min_rows
    if not wanted or rows == 0:
        return DenseIndex(search="exact", rows=rows)
    from lancedb.index import IvfHnswSq, IvfPq, IvfRq, IvfSq

    dim = lance_table.schema.field("vector").type.list_size
    algorithm = like.algorithm if like else settings.ann_type
    params = dict(like.params) if like else {
        "num_partitions": (settings.num_partitions or max(1, round(math.sqrt(rows))))
        if rows >= MIN_TRAIN_ROWS else 1,
        **({"num_sub_vectors": settings.num_sub_vectors or max(1, dim // 8),
            "num_bits": 8 if rows >= MIN_TRAIN_ROWS else 4}
           if algorithm == "IVF_PQ" else {}),
    }
    started = time.perf_counter()
    config = {"IVF_PQ": IvfPq, "IVF_SQ": IvfSq, "IVF_RQ": IvfRq, "IVF_HNSW_SQ": IvfHnswSq}[algorithm](
        distance_type="cosine", **params)
    lance_table.create_index("vector", config=config, name=ANN_NAME)
    scalar = _scalar_indexes(lance_table)
    build_s = round(time.perf_counter() - started, 3)
    log.info("%s index on %d rows (%s) in %.1f s", algorithm, rows, params, build_s)
    return DenseIndex(search="ann", algorithm=algorithm, params=params, name=ANN_NAME, rows=rows,
                      build_s=build_s, scalar=scalar)


def _scalar_indexes(lance_table) -> dict[str, str]:
    from lancedb.index import BTree, Bitmap, LabelList

    kinds = {"BITMAP": Bitmap, "LABEL_LIST": LabelList, "BTREE": BTree}
    for column, kind in SCALAR.items():
        lance_table.create_index(column, config=kinds[kind](), name=f"{column}_idx")
    return dict(SCALAR)


def has_dense_index(lance_table, dense: DenseIndex) -> bool:
    """The recorded ANN index is on this version (a version rewritten without it has none)."""
    try:
        return any(i.name == dense.name for i in lance_table.list_indices())
    except Exception as exc:  # an unreadable index directory
        log.error("cannot list the indexes of %s: %s", lance_table.name, exc)
        return False
