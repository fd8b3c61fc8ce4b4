"""Dense channel: LanceDB vector search with the access policy as a prefilter."""
from __future__ import annotations

import numpy as np

from tasks.query.authorize import sql_literal


def filter_clause(allowed_where: str, corpus: str | None = None, date_from: str | None = None,
                  date_to: str | None = None) -> str:
    """The principal's clause narrowed by corpus and an inclusive ISO date range."""
    parts = [f"({allowed_where})"]
    if corpus is not None:
        parts.append(f"corpus = {sql_literal(corpus)}")
    if date_from is not None:
        parts.append(f"date >= {sql_literal(date_from)}")
    if date_to is not None:
        parts.append(f"date <= {sql_literal(date_to)}")
    return " AND ".join(parts)


def search(lance_table, vector: np.ndarray, where: str, limit: int) -> tuple[list[str], np.ndarray]:
    """Chunk ids and cosine similarities of the `limit` nearest allowed chunks, best first.

    `prefilter=True` applies the clause before the nearest-neighbour search, so the k results
    are the k best *allowed* chunks, not what survives of a global top-k.
    """
    if limit <= 0:
        return [], np.zeros(0, dtype=np.float32)
    res = (lance_table.search(vector.astype(np.float32), vector_column_name="vector")
           .metric("cosine").where(where, prefilter=True).select(["chunk_id", "_distance"])
           .limit(limit).to_arrow())
    sims = 1.0 - res.column("_distance").to_numpy().astype(np.float32)
    return res.column("chunk_id").to_pylist(), sims
