"""The retrieval channels of one generation, as seen by one principal.

Open once per (generation, principal) and call the channels: BM25, dense, date range, exact
substring (chunk level), their document max-pools, the temporal channel, and the warm start
that fuses them. The allowed set is computed at open time and applied *before* scoring in
every channel; nothing outside it is ever scored, returned or fetched.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

import numpy as np

from schemas.embedding import EmbeddingSpaceMismatch
from schemas.lineage import CHUNK_SCHEMA, conform
from schemas.retrieval import ChunkHit, DocHit, FusedHit, Principal, RetrievalSettings
from schemas.settings import MabillonSettings
from tasks.query import bm25 as bm25_mod
from tasks.query import dense as dense_mod
from tasks.query.analysis import analyze, named_corpora, question_query
from tasks.query.authorize import AllowedSet
from tasks.query.fusion import balance, rrf
from tasks.query.substring import normalize, occurrence_scores
from tasks.query.temporal import decay_scores
from tasks.query.view import VIEW_COLUMNS, GenerationView, first_rows, max_pool, top_rows
from tasks.store.location import Location

log = logging.getLogger(__name__)


QUERY_CACHE = 8192  # query vectors kept per embedding space


class NoServingGeneration(LookupError):
    """Nothing has been published yet, so there is nothing to search."""


class Retriever:
    def __init__(self, *, generation: str, space_id: str, view: GenerationView,
                 lance_table, embed_queries: Callable[[list[str]], np.ndarray],
                 principal: Principal,
                 retrieval: RetrievalSettings, index_dir: Location | Path | None,
                 excluded_doc_ids: Iterable[str] = (), as_of: datetime | None = None,
                 route: str = "requested"):
        self.generation = generation
        self.route = route  # serving | canary | requested: how this generation was chosen
        self.space_id = space_id
        self.principal = principal
        self.params = retrieval
        self._view = view
        self._lance = lance_table
        self._embed_queries = embed_queries
        # Query vectors depend only on the embedding space: shared by every retriever of it.
        self._qvecs = _QUERY_VECTORS.setdefault(space_id, OrderedDict())
        self._index_dir = index_dir
        # who (tenant, groups), what (tombstones) and when (validity at the query time)
        self._access = AllowedSet(view.table, principal, excluded_doc_ids, as_of)
        self._first = first_rows(view)
        self._bm25: bm25_mod.Bm25Index | None = None
        self._folded: list[str] | None = None
        self._lock = threading.Lock()  # lazy index loads happen once under concurrent queries
        log.info("retriever %s for %s: %d of %d chunks allowed", generation,
                 principal.principal_id, int(self._allowed.sum()), len(view))

    @classmethod
    def open(cls, settings: MabillonSettings, principal: Principal, generation: str | None = None,
             excluded_doc_ids: Iterable[str] | None = None,
             as_of: str | datetime | None = None) -> "Retriever":
        """Open the generation routed to `principal` (a canary's, or the serving one), or
        `generation`, as it stood at `as_of` (default: at each search).

        `excluded_doc_ids` defaults to the tombstone list, which lives outside any generation
        and so applies to whichever one is opened (a rollback cannot resurrect a deletion).

        Refuses with EmbeddingSpaceMismatch when the configured query encoder is not the
        encoder the generation's vectors were made with.
        """
        from tasks.embedding import load_embedder
        from tasks.store.lance_store import open_generation_table
        from tasks.store.layout import StoreLayout
        from tasks.store.manifests import read_manifest
        from tasks.query.validity import resolve_as_of
        from tasks.store.routing import read_routing

        at = resolve_as_of(as_of, principal)  # before anything is read: a bad one changes nothing
        layout = StoreLayout.from_settings(settings)
        routed = None if generation else read_routing(layout).route_for(principal.groups)
        gen = generation or (routed.generation if routed else None)
        if gen is None:
            raise NoServingGeneration(f"no generation serves under {layout.manifests}; "
                                      "run `mabillon ingest` first")
        manifest = read_manifest(layout, gen)
        # The encoder follows the generation (promotion and rollback switch both together);
        # an encoder configured explicitly must match it, or the query is refused below.
        chosen = settings.embedding
        if "model" not in settings.embedding.model_fields_set:
            chosen = settings.embedding.model_copy(update={"model": manifest.embedding_model})
        embedder = load_embedder(chosen)
        if embedder.space.space_id != manifest.embedding_space.space_id:
            raise EmbeddingSpaceMismatch(
                f"generation {gen} was embedded with {manifest.embedding_space.model_name} "
                f"(space {manifest.embedding_space.space_id}) but the query encoder is "
                f"{embedder.space.model_name} (space {embedder.space.space_id}); set "
                "MABILLON_EMBEDDING__MODEL to the generation's model or query another generation")
        if excluded_doc_ids is None:
            from tasks.store.tombstones import read_tombstones

            excluded_doc_ids = read_tombstones(layout).doc_ids
        table = open_generation_table(layout, gen)
        view = _load_view(str(layout.lance), gen, table)
        return cls(generation=gen, space_id=manifest.embedding_space.space_id, view=view,
                   lance_table=table, embed_queries=embedder.embed_queries,
                   principal=principal, retrieval=settings.retrieval,
                   index_dir=layout.index_dir(gen), excluded_doc_ids=excluded_doc_ids, as_of=at,
                   route=routed.route if routed else "requested")

    # shared ---------------------------------------------------------------------------------
    @property
    def view(self) -> GenerationView:
        return self._view

    @property
    def _allowed(self) -> np.ndarray:
        return self._access.mask()

    @property
    def _where(self) -> str:
        return self._access.where()

    @property
    def as_of(self) -> datetime | None:
        return self._access.as_of

    @property
    def allowed(self) -> np.ndarray:
        return self._allowed.copy()

    def prime(self, queries: list[str]) -> None:
        """Embed queries in one batch ahead of their searches (an evaluation knows them all;
        one batch costs a fraction of one call per query)."""
        with _QUERY_LOCK:
            missing = list(dict.fromkeys(q for q in queries if q.strip() and q not in self._qvecs))
        for start in range(0, len(missing), 64):
            batch = missing[start:start + 64]
            vecs = self._embed_queries(batch)
            with _QUERY_LOCK:
                for q, v in zip(batch, vecs):
                    self._remember(q, v)

    def _remember(self, query: str, vector: np.ndarray) -> None:
        self._qvecs[query] = vector
        self._qvecs.move_to_end(query)
        while len(self._qvecs) > QUERY_CACHE:
            self._qvecs.popitem(last=False)

    def query_vector(self, query: str) -> np.ndarray:
        with _QUERY_LOCK:
            vec = self._qvecs.get(query)
        if vec is None:
            vec = self._embed_queries([query])[0]
            with _QUERY_LOCK:
                self._remember(query, vec)
        return vec

    def _index(self) -> bm25_mod.Bm25Index:
        with self._lock:
            if self._bm25 is None:
                v = self._view
                self._bm25 = _cached_bm25(self.generation, self._index_dir, v,
                                          self.params.stem, self.params.char_ngrams)
        return self._bm25

    def bm25_scores(self, query: str) -> np.ndarray:
        """BM25 of every row (0 outside the allowed set), statistics of the allowed set."""
        terms = analyze(query, stem=self.params.stem, ngrams=self.params.char_ngrams)
        return self._index().scores(terms, self._allowed, self.params.bm25_k1, self.params.bm25_b)

    def _dense_rows(self, query: str, limit: int, mask: np.ndarray, corpus: str | None,
                    date_from: str | None, date_to: str | None) -> tuple[np.ndarray, np.ndarray]:
        if not query.strip() or limit <= 0 or not mask.any():
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        where = dense_mod.filter_clause(self._where, corpus, date_from, date_to)
        ids, sims = dense_mod.search(self._lance, self.query_vector(query), where, limit)
        rows = np.fromiter((self._view.row_of(c) for c in ids), dtype=np.int64, count=len(ids))
        keep = mask[rows]  # the prefilter already did this; a row outside it is a bug, not data
        if not keep.all():
            log.error("dense search returned %d rows outside the allowed set; dropped",
                      int((~keep).sum()))
        return rows[keep], sims[keep]

    # chunk channels -------------------------------------------------------------------------
    def bm25_chunks(self, query: str, k: int = 50, corpus: str | None = None,
                    date_from: str | None = None, date_to: str | None = None) -> list[ChunkHit]:
        mask = self._view.filter_mask(self._allowed, corpus, date_from, date_to)
        rows, scores = top_rows(self.bm25_scores(query), mask, k)
        return self._view.chunk_hits(rows, scores)

    def dense_chunks(self, query: str, k: int = 50, corpus: str | None = None,
                     date_from: str | None = None, date_to: str | None = None) -> list[ChunkHit]:
        mask = self._view.filter_mask(self._allowed, corpus, date_from, date_to)
        rows, sims = self._dense_rows(query, k, mask, corpus, date_from, date_to)
        return self._view.chunk_hits(rows, sims)

    def date_range_chunks(self, date_from: str, date_to: str, k: int = 50,
                          corpus: str | None = None, query: str | None = None) -> list[ChunkHit]:
        """Chunks of documents dated in [date_from, date_to]: by BM25 of `query` when given
        (chunks that do not match it follow), else by date, document and position."""
        v = self._view
        rows = np.flatnonzero(v.filter_mask(self._allowed, corpus, date_from, date_to))
        scores = (self.bm25_scores(query)[rows] if query and query.strip()
                  else np.zeros(rows.size, np.float32))
        order = np.lexsort((v.ordinal[rows], v.doc_codes[rows], v.days[rows], -scores))[:k]
        return v.chunk_hits(rows[order], scores[order])

    def substring_chunks(self, text: str, k: int = 50, corpus: str | None = None) -> list[ChunkHit]:
        """Chunks containing `text` (case, accents and spacing ignored), most occurrences first."""
        with self._lock:
            if self._folded is None:
                self._folded = [normalize(t) for t in self._view.texts]
        mask = self._view.filter_mask(self._allowed, corpus)
        rows, scores = top_rows(occurrence_scores(self._folded, text, mask), mask, k)
        return self._view.chunk_hits(rows, scores)

    # document channels ----------------------------------------------------------------------
    def bm25_docs(self, query: str, k: int = 50, corpus: str | None = None) -> list[DocHit]:
        mask = self._view.filter_mask(self._allowed, corpus)
        scores = self.bm25_scores(query)
        rows = np.flatnonzero(mask & (scores > 0))
        return max_pool(self._view, rows, scores[rows], k)

    def dense_docs(self, query: str, k: int = 50, corpus: str | None = None) -> list[DocHit]:
        mask = self._view.filter_mask(self._allowed, corpus)
        limit = min(int(mask.sum()), max(self.params.dense_candidates, k))
        rows, sims = self._dense_rows(query, limit, mask, corpus, None, None)
        return max_pool(self._view, rows, sims, k)

    def temporal_docs(self, date: str, k: int = 50, corpus: str | None = None,
                      half_life_days: float | None = None) -> list[DocHit]:
        """Documents by exp(-ln2·|days from `date`|/half-life); each cites its opening chunk."""
        v = self._view
        scores = decay_scores(v.days, date, half_life_days or self.params.half_life_days)
        mask = v.filter_mask(self._allowed, corpus) & self._first
        rows, s = top_rows(scores, mask, k)
        return [v.doc_hit(int(r), float(x), n + 1) for n, (r, x) in enumerate(zip(rows, s))]

    def warm_start(self, query: str, k: int = 50, target_corpus: str | None = None,
                   date: str | None = None) -> list[FusedHit]:
        """Weighted RRF of BM25, dense and (with a date) temporal document rankings.

        The query is a question or sub-question in natural language: its meta-language and
        the sub-corpus names are dropped before the lexical channel (`question_query`).
        `target_corpus` constrains the candidates of every channel, so a sub-question aimed at
        a small sub-corpus gets that corpus's best documents rather than the big one's;
        without one, a question naming two or more sub-corpora is held to them
        (`corpus_cues`), and the fused list interleaves sub-corpora (`balance`).
        """
        p = self.params
        depth = max(k, p.fusion_depth)
        lexical = question_query(query, tuple(self.corpora()), p.stem) if p.strip_question else query
        semantic = lexical if p.strip_question_dense else query
        rankings: dict[str, list[DocHit]] = {
            "bm25": self.bm25_docs(lexical or query, depth, target_corpus),
            "dense": self.dense_docs(semantic or query, depth, target_corpus),
        }
        if date:
            rankings["temporal"] = self.temporal_docs(date, depth, target_corpus)
        weights = {c: w for c, w in p.weights.items() if w > 0}
        fused = rrf({c: h for c, h in rankings.items() if c in weights}, weights, k=p.rrf_k)
        if target_corpus is None:
            named = named_corpora(query, tuple(self.corpora()), p.stem) if p.corpus_cues else []
            if len(named) >= 2:  # "between paper A and paper B": look only there
                fused = [h for h in fused if h.corpus in named]
            if p.balance_corpora:
                return balance(fused, limit=k)
        return [h for h in fused[:k]]

    # lookups --------------------------------------------------------------------------------
    def chunk(self, chunk_id: str) -> ChunkHit:
        """A chunk's text and position; an unknown and a forbidden chunk look the same."""
        try:
            row = self._view.row_of(chunk_id)
        except KeyError:
            row = None
        if row is None or not self._allowed[row]:
            raise KeyError(f"no chunk {chunk_id!r} visible to {self.principal.principal_id} "
                           f"in generation {self.generation}")
        return self._view.chunk_hit(row, 0.0, 1)

    def corpora(self) -> list[str]:
        return self._view.corpora(self._allowed)


# Process-wide caches keyed by generation: a view and an index are the same for every principal
# (the allowed set is applied at query time), and a generation never changes once published.
_VIEWS: dict[tuple[str, str], GenerationView] = {}
_QUERY_VECTORS: dict[str, OrderedDict[str, np.ndarray]] = {}
_QUERY_LOCK = threading.Lock()
_INDEXES: dict[tuple[str, str, str, bool, int], bm25_mod.Bm25Index] = {}


def _load_view(lance_path: str, generation: str, table) -> GenerationView:
    key = (generation, lance_path)
    if key not in _VIEWS:
        stored = [c for c in VIEW_COLUMNS if c in table.schema.names]  # older generations lack some
        arrow = table.search().select(stored).limit(table.count_rows()).to_arrow()
        _VIEWS[key] = GenerationView.from_table(conform(arrow, CHUNK_SCHEMA))
    return _VIEWS[key]


def _cached_bm25(generation: str, index_dir: Location | Path | None, view: GenerationView, stem: bool,
                 ngrams: int) -> bm25_mod.Bm25Index:
    ids = list(view.chunk_ids)
    if index_dir is None:
        return bm25_mod.Bm25Index.build(view.texts, ids, stem, ngrams)
    key = (generation, str(index_dir), bm25_mod.digest_ids(ids), stem, ngrams)
    if key not in _INDEXES:
        _INDEXES[key] = bm25_mod.load_or_build(index_dir, view.texts, ids, stem, ngrams)
    return _INDEXES[key]


def drop_caches(generation: str | None = None) -> None:
    """Forget in-process views and indexes (of one generation, or all). Deleting a generation's
    index directory drops the on-disk copy; this drops the in-memory one."""
    for cache in (_VIEWS, _INDEXES):
        for key in [k for k in cache if generation is None or k[0] == generation]:
            del cache[key]
