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
    # LanceDB index type. IVF_RQ (RaBitQ: one bit per dimension, IVF partitions, no graph,
    # candidates re-ranked on the full vectors): at 1M chunks, 240 probes, 30 x 10 re-ranked,
    # recall@10 0.98 in 11 ms where IVF_SQ (8-bit codes, 8x the bytes to scan) gave 0.98 in
    # 33-43 ms; with the scalar indexes built in 51 s against 56 s, 72 MB against ~400 MB
    # (docs/benchmarks.md, stop 25). IVF_SQ gave recall 1.00 at
    # 100k with refine_factor 10 in 15 ms; IVF_PQ (48 x 8-bit codes) reached 0.96 only with
    # nprobes 48 and refine_factor 50 and took 12x longer to build. IVF flat partitions keep
    # working under a metadata prefilter, where LanceDB warns that HNSW graphs vary in latency.
    ann_type: Literal["IVF_RQ", "IVF_SQ", "IVF_PQ", "IVF_HNSW_SQ"] = "IVF_RQ"
    num_partitions: int | None = None  # None: about sqrt(rows)
    num_sub_vectors: int | None = None  # IVF_PQ only; None: dim / 8 (8 dimensions per code)
    # Query-time search of the ANN index: `nprobes` partitions (scaled up under a filter, see
    # DensePlan.probes_for), and refine_factor x k candidates re-ranked on the full vectors.
    # None (the default): the generation's algorithm's own (SEARCH_DEFAULTS), since a served
    # home may hold generations of several algorithms (rollback serves the old one as built).
    nprobes: int | None = Field(default=None, ge=1)
    refine_factor: int | None = Field(default=None, ge=1)
    # ... but never more re-ranked candidates than max(limit, refine_rows): the dense document
    # channel asks for up to `dense_candidates` (1000) chunks to max-pool, and re-ranking 10 x
    # 1000 full vectors was two thirds of its time at 100k for no change in its documents
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
    # centroids, quantized codes and scalar indexes read so far. A 1M-chunk index is 72 MB on
    # disk as IVF_RQ, ~400 MB as IVF_SQ; a smaller cache bounds memory at the cost of reading
    # partitions again (page cache).
    cache_mb: int = Field(default=1024, ge=16)


# Per ANN algorithm: (partitions probed, candidates re-ranked per result row on the full
# vectors), measured with bench_scale at 1M chunks (docs/benchmarks.md). IVF_RQ's one-bit codes
# rank coarsely, so re-ranking, not probing, sets its recall: at 100 %, recall@10 0.957 / 0.973
# with 160 probes and factor 30 / 60, 0.953 / 0.97 with 240; at 10 % 1.00 with 160 and 60.
# IVF_SQ: 24 probes gave 0.84 / 0.83 at 100k / 1M, 160 gave 0.98 on one build and 0.94 on
# another, 240 gave 0.98 (k-means differs per build).
SEARCH_DEFAULTS = {"IVF_RQ": (160, 60), "IVF_SQ": (240, 10), "IVF_PQ": (240, 50), "IVF_HNSW_SQ": (240, 10)}


def search_defaults(algorithm: str | None, nprobes: int | None,
                    refine_factor: int | None) -> tuple[int, int]:
    """(nprobes, refine_factor): each setting when given, else the algorithm's own."""
    probes, refine = SEARCH_DEFAULTS.get(algorithm or "", (240, 10))
    return (nprobes if nprobes is not None else probes,
            refine_factor if refine_factor is not None else refine)


class DenseIndex(BaseModel):
    search: Literal["exact", "ann"]
    metric: str = "cosine"
    algorithm: str | None = None  # e.g. IVF_RQ
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
    analyzer: str  # analyzer id (tasks.index.analyzer.analyzer_id)
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
