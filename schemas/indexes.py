"""The index contract: how a generation is searched, recorded in its manifest.

A generation carries its own indexes (rollback serves the old generation with its old indexes;
purge and gc reach them). The manifest names, for the vector column, exact search or the ANN
algorithm with its parameters and build time, and, for the lexical channel, the index, its
analyzer and where its files are; the settings below decide what a new generation gets and how
queries use it.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class IndexSettings(BaseModel):
    """What publish builds and how queries search it (``MABILLON_INDEX__<FIELD>``)."""

    # A generation with at least this many chunks gets an ANN index on its vector column;
    # below it, dense search stays exact. 0 forces the index on any generation.
    ann_min_rows: int = 200_000
    # LanceDB index type. IVF_SQ (8-bit scalar codes per dimension, IVF partitions, no graph):
    # measured at 100k chunks (docs/benchmarks.md, bench/bench_ann_variants.py) it gives
    # recall@10 1.00 at 100 %, 10 % and 1 % selectivity with refine_factor 10, in 15 ms,
    # built in 16 s; IVF_PQ (48 x 8-bit codes) reached 0.96 only with nprobes 48 and
    # refine_factor 50 and took 12x longer to build. IVF flat partitions keep working under a
    # metadata prefilter, where LanceDB warns that HNSW graphs vary in latency.
    ann_type: Literal["IVF_SQ", "IVF_PQ", "IVF_HNSW_SQ"] = "IVF_SQ"
    num_partitions: int | None = None  # None: about sqrt(rows)
    num_sub_vectors: int | None = None  # IVF_PQ only; None: dim / 8 (8 dimensions per code)
    # Query-time search of the ANN index: `nprobes` partitions (scaled up under a filter, see
    # DensePlan.probes_for), and refine_factor x k candidates re-ranked on the full vectors,
    # which is what lifts SQ's 0.98 to 1.00 on near-duplicate neighbourhoods. 24 probes gave
    # recall@10 0.84 / 0.83 at 100k / 1M chunks and 160 gave 0.98 / 0.98 (bench_scale,
    # docs/benchmarks.md); until LanceDB 0.40's maximum_nprobes(0) was dropped, every
    # partition was probed, which hid it. A second 1M build (k-means differs per build) gave
    # 0.94 with 160 and 0.98 with 240: 240, for a margin over the 0.95 the issue asks.
    nprobes: int = 240
    refine_factor: int = 10
    # ... but never more re-ranked candidates than max(limit, refine_rows): the dense document
    # channel asks for `dense_candidates` (1000) chunks to max-pool, and re-ranking 10 x 1000
    # full vectors was two thirds of its time at 100k for no change in its documents
    # (docs/benchmarks.md, "The query side at scale").
    refine_rows: int = 1000
    # With an ANN index, a principal (or a filter) that sees at most this many rows gets an
    # exact search over exactly those rows: cheap at that size, and IVF partitions hold few
    # allowed rows under a narrow filter. 0: always the index.
    exact_below_allowed: int = 20_000
    # An index file that is missing or unreadable: "exact" serves by exact search and flags
    # the evidence package (dense only: exact dense search needs no index), "error" refuses.
    on_missing: Literal["exact", "error"] = "exact"
    # LanceDB's index cache in a serving process, shared by all its retrievers (MiB): the IVF
    # centroids, SQ codes and scalar indexes read so far. A 1M-chunk IVF_SQ index is ~400 MB;
    # a smaller cache bounds memory at the cost of reading partitions again (page cache).
    cache_mb: int = Field(default=1024, ge=16)


class DenseIndex(BaseModel):
    search: Literal["exact", "ann"]
    metric: str = "cosine"
    algorithm: str | None = None  # e.g. IVF_SQ
    params: dict = Field(default_factory=dict)
    name: str | None = None  # the LanceDB index name on the generation's table version
    rows: int = 0
    build_s: float = 0.0
    # Scalar indexes that make the access prefilter cheap at scale (column → kind).
    scalar: dict[str, str] = Field(default_factory=dict)


class LexicalBuild(BaseModel):
    """What building a lexical index produced."""

    rows: int
    terms: int
    postings: int
    size_bytes: int
    chunk_digest: str
    build_s: float


class LexicalIndex(LexicalBuild):
    kind: Literal["postings-v1"] = "postings-v1"
    analyzer: str  # analyzer id (tasks.query.analysis.analyzer_id)
    stem: bool
    char_ngrams: int
    # BM25 document frequencies and lengths are taken over the principal's allowed rows at
    # query time, never over the whole table: a forbidden chunk shifts no score.
    statistics: Literal["allowed-rows"] = "allowed-rows"
    path: str  # folder of the index files, relative to the generation's index folder


class IndexContract(BaseModel):
    dense: DenseIndex
    lexical: LexicalIndex | None = None


class IndexUnavailable(RuntimeError):
    """A generation's index is missing or unreadable and the settings refuse to serve without it."""
