"""Dense channel: LanceDB vector search with the access policy as a prefilter.

Exact (flat) search below the generation's ANN threshold, as the index contract records; above
it, the ANN index with `nprobes` / `refine_factor` from the settings. Either way the filter is a
prefilter, so the k results are the k best *allowed* rows, not what survives of a global top-k;
a filter that leaves few rows is searched exactly over those rows (`exact_below_allowed`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.query.authorize import sql_literal


@dataclass(frozen=True)
class DensePlan:
    """How this generation's vectors are searched (from its manifest and the settings)."""

    ann: bool = False  # the version carries an ANN index to use
    nprobes: int = 24
    refine_factor: int = 4
    exact_below_allowed: int = 0

    def use_index(self, allowed_rows: int) -> bool:
        return self.ann and allowed_rows > self.exact_below_allowed


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


def search(lance_table, vector: np.ndarray, where: str, limit: int, plan: DensePlan = DensePlan(),
           allowed_rows: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Lance `_rowid`s and cosine similarities of the `limit` nearest allowed rows, best first."""
    if limit <= 0:
        return np.zeros(0, np.uint64), np.zeros(0, dtype=np.float32)
    query = (lance_table.search(vector.astype(np.float32), vector_column_name="vector")
             .metric("cosine").where(where, prefilter=True).select([]).with_row_id(True)
             .limit(limit))
    if plan.use_index(allowed_rows):
        # maximum_nprobes 0: keep probing partitions until `limit` allowed rows are found
        query = query.nprobes(plan.nprobes).maximum_nprobes(0).refine_factor(plan.refine_factor)
    else:
        query = query.bypass_vector_index()
    res = query.to_arrow()
    sims = 1.0 - res.column("_distance").to_numpy().astype(np.float32)
    return res.column("_rowid").to_numpy().astype(np.uint64), sims
