"""Build and check a generation's vector index on its Lance version, with the scalar indexes
that let Lance evaluate the access prefilter (and corpus/date filters) without scanning columns.
Exact search below `IndexSettings.ann_min_rows`; what was built is the `DenseIndex` of the
generation's index contract.
"""
from __future__ import annotations

import logging
import math
import time

from schemas.indexes import DenseIndex, IndexSettings

log = logging.getLogger(__name__)

ANN_NAME = "vector_ann"
# PQ trains 256 centroids per sub-vector (8 bits); a smaller table (an index forced on a
# sample, as the tests do) gets 4-bit codes and one partition.
MIN_TRAIN_ROWS = 256
# Scalar indexes that let Lance evaluate the access filter (and corpus/date filters) without
# scanning the columns; built with the ANN index, where tables are large.
SCALAR = {"tenant": "BITMAP", "groups": "LABEL_LIST", "doc_id": "BTREE", "corpus": "BITMAP",
          "date": "BTREE"}


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
