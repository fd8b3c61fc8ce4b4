"""One generation as seen by one principal: the channels, with its allowed set, and the warm
start that fuses them.

Open once per (generation, principal): `open` takes what `tasks.store.serving` opens (routing,
manifest, integrity, tombstones, encoder choice), loads the query encoder it names and checks its
space. Each channel is a function of (generation, allowed set, query) in `tasks.query.channels`;
the retriever binds the first two. The allowed set (`AccessPolicy.allowed_set`: who and what fixed
at open time, when — the validity interval at the query time — at each search) is applied
*before* scoring in every channel; nothing outside it is ever scored, returned or fetched.

Memory is bounded: the generation's compact row metadata (`view`) and the lexical index's term
table are held (`tasks.query.searchable`); postings are read from disk per query term, vectors
are searched inside LanceDB, and text is fetched only for the rows a channel returns.
"""
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import numpy as np

from schemas.embedding import EmbeddingSpaceMismatch
from schemas.indexes import IndexContract, IndexSettings
from schemas.retrieval import DocHit, FusedHit, Hit, Principal, RetrievalSettings
from schemas.settings import MabillonSettings
from tasks.access.policy import AccessPolicy, AllowedSet
from tasks.index.dense_search import DensePlan, dense_plan
from tasks.index.postings import PostingsIndex
from tasks.query import channels
from tasks.query.analysis import named_corpora, question_query
from tasks.query.fusion import balance, ocr_prior, rrf
from tasks.query.searchable import Searchable, load_view
from tasks.query.view import GenerationView
from tasks.store.location import Location

log = logging.getLogger(__name__)


# The dense channel of a warm start runs beside the lexical one: its query embedding (ONNX) and
# LanceDB search release the GIL, as do the compiled BM25 loops, so on two cores a warm start
# costs about the slower channel, not the sum (docs/benchmarks.md, "A million chunks").
_CHANNELS: tuple[int, ThreadPoolExecutor] | None = None
_CHANNELS_LOCK = threading.Lock()


def _channel_pool() -> ThreadPoolExecutor:
    """This process's pool: a forked child inherits the parent's pool but none of its threads
    (work handed to it would wait forever), so each process makes its own."""
    global _CHANNELS
    with _CHANNELS_LOCK:
        if _CHANNELS is None or _CHANNELS[0] != os.getpid():
            _CHANNELS = (os.getpid(), ThreadPoolExecutor(max_workers=4,
                                                         thread_name_prefix="mabillon-dense"))
        return _CHANNELS[1]


class Retriever:
    def __init__(self, *, generation: str, space_id: str, view: GenerationView,
                 lance_table, embed_queries: Callable[[list[str]], np.ndarray],
                 principal: Principal,
                 retrieval: RetrievalSettings, index_dir: Location | Path | None,
                 excluded_doc_ids: Iterable[str] = (),
                 dense_plan: DensePlan = DensePlan(),
                 contract: IndexContract | None = None,
                 index_settings: IndexSettings | None = None,
                 index_flags: Iterable[str] = (), as_of: datetime | None = None,
                 route: str = "requested"):
        self.route = route  # serving | canary | requested: how this generation was chosen
        self.principal = principal
        self.search = Searchable(generation=generation, space_id=space_id, view=view,
                                 lance_table=lance_table, embed_queries=embed_queries,
                                 retrieval=retrieval, index_dir=index_dir, dense_plan=dense_plan,
                                 contract=contract, index_settings=index_settings,
                                 index_flags=index_flags)
        # who (tenant, groups), what (tombstones) and when (validity at the query time)
        self.access: AllowedSet = AccessPolicy(principal, excluded_doc_ids).allowed_set(view, as_of)
        self._corpora: list[str] | None = None  # the sub-corpora this principal sees
        log.info("retriever %s for %s: %d of %d chunks allowed", generation,
                 principal.principal_id, self.access.count, len(view))

    @classmethod
    def open(cls, settings: MabillonSettings, principal: Principal, generation: str | None = None,
             excluded_doc_ids: Iterable[str] | None = None,
             as_of: str | datetime | None = None) -> "Retriever":
        """Open the generation routed to `principal` (a canary's, or the serving one), or
        `generation`, as it stood at `as_of` (default: at each search); an unreadable `as_of`
        is refused (InvalidAsOf) before anything is read.

        `excluded_doc_ids` defaults to the tombstone list, which lives outside any generation
        and so applies to whichever one is opened (a rollback cannot resurrect a deletion).

        Refuses with EmbeddingSpaceMismatch when the configured query encoder is not the
        encoder the generation's vectors were made with, and with IndexUnavailable when an
        index the generation records is missing and the settings refuse to serve without it.
        """
        from tasks.compiled_encoder import query_encoder
        from tasks.embedding import load_embedder
        from tasks.access.validity import resolve_as_of
        from tasks.store.serving import open_serving

        at = resolve_as_of(as_of, principal)  # before anything is read: a bad one changes nothing
        served = open_serving(settings, principal.groups, generation, excluded_doc_ids)
        gen, manifest, chosen = served.generation, served.manifest, served.encoder
        embedder = query_encoder(served.layout.encoders, chosen, manifest.embedding_space) \
            if chosen.model == manifest.embedding_model else load_embedder(chosen)
        if embedder.space.space_id != manifest.embedding_space.space_id:
            raise EmbeddingSpaceMismatch(
                f"generation {gen} was embedded with {manifest.embedding_space.model_name} "
                f"(space {manifest.embedding_space.space_id}) but the query encoder is "
                f"{embedder.space.model_name} (space {embedder.space.space_id}); set "
                "MABILLON_EMBEDDING__MODEL to the generation's model or query another generation")
        table = served.table
        view = load_view(str(served.layout.lance), gen, table)
        plan, flags = dense_plan(gen, table, manifest.indexes, settings.index)
        return cls(generation=gen, space_id=manifest.embedding_space.space_id, view=view,
                   lance_table=table, embed_queries=embedder.embed_queries,
                   principal=principal, retrieval=settings.retrieval,
                   index_dir=served.index_dir, excluded_doc_ids=served.excluded_doc_ids,
                   dense_plan=plan, contract=manifest.indexes, index_settings=settings.index,
                   index_flags=flags, as_of=at, route=served.route)

    # the generation, as searched -------------------------------------------------------------
    @property
    def generation(self) -> str:
        return self.search.generation

    @property
    def space_id(self) -> str:
        return self.search.space_id

    @property
    def params(self) -> RetrievalSettings:
        return self.search.params

    @property
    def view(self) -> GenerationView:
        return self.search.view

    @property
    def dense_plan(self) -> DensePlan:
        return self.search.dense_plan

    @property
    def index_flags(self) -> list[str]:
        """What the evidence package must say about how this generation was searched."""
        return self.search.index_flags

    @property
    def as_of(self) -> datetime | None:
        return self.access.as_of

    @property
    def allowed(self) -> np.ndarray:
        return self.access.mask.copy()

    def prime(self, queries: list[str]) -> None:
        self.search.prime(queries)

    def query_vector(self, query: str) -> np.ndarray:
        return self.search.query_vector(query)

    def lexical(self) -> PostingsIndex:
        return self.search.lexical()

    def bm25_scores(self, query: str) -> np.ndarray:
        """BM25 of every row (0 outside the allowed set), statistics of the allowed set."""
        return self.search.bm25_scores(query, self.access.mask)

    def bm25_top(self, query: str, target: np.ndarray, k: int,
                 docs: bool = False) -> tuple[np.ndarray, np.ndarray]:
        return channels.bm25_top(self.search, self.access, query, target, k, docs)

    # channels (tasks.query.channels, bound to this generation and principal) ----------------
    def bm25_chunks(self, query: str, k: int = 50, corpus: str | None = None,
                    date_from: str | None = None, date_to: str | None = None) -> list[Hit]:
        return channels.bm25_chunks(self.search, self.access, query, k, corpus, date_from, date_to)

    def dense_chunks(self, query: str, k: int = 50, corpus: str | None = None,
                     date_from: str | None = None, date_to: str | None = None) -> list[Hit]:
        return channels.dense_chunks(self.search, self.access, query, k, corpus, date_from, date_to)

    def date_range_chunks(self, date_from: str, date_to: str, k: int = 50,
                          corpus: str | None = None, query: str | None = None) -> list[Hit]:
        return channels.date_range_chunks(self.search, self.access, date_from, date_to, k, corpus,
                                          query)

    def substring_chunks(self, text: str, k: int = 50, corpus: str | None = None) -> list[Hit]:
        return channels.substring_chunks(self.search, self.access, text, k, corpus)

    def bm25_docs(self, query: str, k: int = 50, corpus: str | None = None) -> list[DocHit]:
        return channels.bm25_docs(self.search, self.access, query, k, corpus)

    def dense_docs(self, query: str, k: int = 50, corpus: str | None = None) -> list[DocHit]:
        return channels.dense_docs(self.search, self.access, query, k, corpus)

    def temporal_docs(self, date: str, k: int = 50, corpus: str | None = None,
                      half_life_days: float | None = None) -> list[DocHit]:
        return channels.temporal_docs(self.search, self.access, date, k, corpus, half_life_days)

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
        dense = _channel_pool().submit(self.dense_docs, semantic or query, depth, target_corpus)
        bm25 = self.bm25_docs(lexical or query, depth, target_corpus)
        # a dense failure is raised here, as it was when the channels ran one after the other
        rankings: dict[str, list[DocHit]] = {"bm25": bm25, "dense": dense.result()}
        if date:
            rankings["temporal"] = self.temporal_docs(date, depth, target_corpus)
        weights = {c: w for c, w in p.weights.items() if w > 0}
        fused = rrf({c: h for c, h in rankings.items() if c in weights}, weights, k=p.rrf_k)
        if p.ocr_weight:  # before corpus cues and balancing, which keep its order within a corpus
            fused = ocr_prior(fused, lambda h: self.view.ocr_quality_of(h.best_chunk_id),
                              p.ocr_weight, k=p.rrf_k)
        if target_corpus is None:
            named = named_corpora(query, tuple(self.corpora()), p.stem) if p.corpus_cues else []
            if len(named) >= 2:  # "between paper A and paper B": look only there
                fused = [h for h in fused if h.corpus in named]
            if p.balance_corpora:
                return balance(fused, limit=k)
        return [h for h in fused[:k]]

    # lookups --------------------------------------------------------------------------------
    def chunk(self, chunk_id: str) -> Hit:
        """A chunk's text and position; an unknown and a forbidden chunk look the same."""
        try:
            row = self.view.row_of(chunk_id)
        except KeyError:
            row = None
        if row is None or not self.access.mask[row]:
            raise KeyError(f"no chunk {chunk_id!r} visible to {self.principal.principal_id} "
                           f"in generation {self.generation}")
        return self.view.chunk_hits(np.array([row]), np.zeros(1, np.float32))[0]

    def corpora(self) -> list[str]:
        # asked twice per warm start; a pass over every allowed row (6 ms at a million chunks)
        if self._corpora is None:
            self._corpora = self.view.corpora(self.access.mask)
        return list(self._corpora)
