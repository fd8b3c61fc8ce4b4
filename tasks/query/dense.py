"""Dense channel: LanceDB vector search with the access policy as a prefilter.

Exact (flat) search below the generation's ANN threshold, as the index contract records; above
it, the ANN index with `nprobes` / `refine_factor` from the settings. Either way the filter is a
prefilter, so the k results are the k best *allowed* rows, not what survives of a global top-k;
a filter that leaves few rows is searched exactly over those rows (`exact_below_allowed`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tasks.access.policy import sql_literal


@dataclass(frozen=True)
class DensePlan:
    """How this generation's vectors are searched (from its manifest and the settings)."""

    ann: bool = False  # the version carries an ANN index to use
    nprobes: int = 240
    refine_factor: int = 4
    exact_below_allowed: int = 0
    refine_rows: int = 1000
    partitions: int = 0  # IVF partitions of the index (0: unknown)
    rows: int = 0  # rows the index was built over

    def use_index(self, allowed_rows: int) -> bool:
        return self.ann and allowed_rows > self.exact_below_allowed

    def probes_for(self, allowed_rows: int) -> int:
        """Partitions to probe: `nprobes` when every row is allowed; under a filter that keeps a
        share s of the rows, nprobes / s^(1/3), never more than the partitions there are.
        nprobes / s (as many allowed candidates as an unfiltered search meets) probed every
        partition of a 1M index at 10 %; the k nearest allowed rows lie farther out than the k
        nearest rows, but not 1/s times as many partitions out. At 1M and 10 % (IVF_RQ, 1,000
        partitions) 1/sqrt(s) (507 probes) and 1/cbrt(s) (345) both kept recall@10 ≥ 0.997
        against exact search, the latter in 3 ms less (bench_scale, docs/benchmarks.md)."""
        if self.partitions <= 0 or self.rows <= 0 or allowed_rows >= self.rows:
            return self.nprobes
        scaled = math.ceil(self.nprobes * (self.rows / max(1, allowed_rows)) ** (1 / 3))
        return max(self.nprobes, min(self.partitions, scaled))

    def refine_for(self, limit: int) -> int:
        """The refine factor for a search of `limit` rows: `refine_factor`, capped so that at
        most max(limit, refine_rows) candidates are re-ranked on their full vectors."""
        return max(1, min(self.refine_factor, self.refine_rows // max(1, limit)))


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


def vector_query(lance_table, vector: np.ndarray, where: str, limit: int, plan: DensePlan,
                 allowed_rows: int, widen: bool = False):
    """The LanceDB query `search` runs: exact over the allowed rows, or the index probed as the
    plan says (`widen`: on until `limit` allowed rows are found). Ids and distances only —
    `select([])` is no projection at all in LanceDB (every column of every candidate row), and
    `_distance` is named because LanceDB 0.40 adds it unasked only with a deprecation warning
    on every search (a later release drops it)."""
    query = (lance_table.search(vector.astype(np.float32), vector_column_name="vector")
             .metric("cosine").where(where, prefilter=True).select(["_rowid", "_distance"]).with_row_id(True)
             .limit(limit))
    if not plan.use_index(allowed_rows):
        return query.bypass_vector_index()
    query = query.nprobes(plan.probes_for(allowed_rows)).refine_factor(plan.refine_for(limit))
    # maximum_nprobes(0) only to widen: in LanceDB 0.40 it probes *every* partition, whether or
    # not the first ones hold `limit` allowed rows (an SQ scan of the whole generation)
    return query.maximum_nprobes(0) if widen else query


def search(lance_table, vector: np.ndarray, where: str, limit: int, plan: DensePlan = DensePlan(),
           allowed_rows: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Lance `_rowid`s and cosine similarities of the `limit` nearest allowed rows, best first."""
    if limit <= 0:
        return np.zeros(0, np.uint64), np.zeros(0, dtype=np.float32)
    res = vector_query(lance_table, vector, where, limit, plan, allowed_rows).to_arrow()
    if plan.use_index(allowed_rows) and res.num_rows < min(limit, allowed_rows):
        # the probed partitions held too few allowed rows: probe on until `limit` are found
        res = vector_query(lance_table, vector, where, limit, plan, allowed_rows, widen=True).to_arrow()
    sims = 1.0 - res.column("_distance").to_numpy().astype(np.float32)
    return res.column("_rowid").to_numpy().astype(np.uint64), sims
