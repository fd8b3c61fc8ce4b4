"""The retrieval channels of one generation, as seen by one principal.

Open once per (generation, principal) and call the channels: BM25, dense, date range, exact
substring (chunk level), their document max-pools, the temporal channel, and the warm start
that fuses them. The allowed set (`authorize.allowed_set`: who and what fixed at open time,
when — the validity interval at the query time — at each search) is applied *before* scoring in
every channel; nothing outside it is ever scored, returned or fetched.

Memory is bounded: the retriever holds the generation's compact row metadata (`view`) and the
lexical index's term table; postings are read from disk per query term, vectors are searched
inside LanceDB, and text is fetched only for the rows a channel returns.
"""
from __future__ import annotations

import logging
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path

import numpy as np

from schemas.embedding import EmbeddingSpaceMismatch
from schemas.indexes import IndexContract, IndexSettings, IndexUnavailable, search_defaults
from schemas.retrieval import DocHit, FusedHit, Hit, Principal, RetrievalSettings
from schemas.settings import MabillonSettings
from tasks.heap import release_freed_memory
from tasks.query import dense as dense_mod
from tasks.query.analysis import analyze, named_corpora, question_query
from tasks.query.authorize import allowed_set
from tasks.query.fusion import balance, rrf
from tasks.query.indexing import has_dense_index, lexical_folder
from tasks.query.lexical_index import PostingsIndex, build_index, chunk_digest
from tasks.query.substring import candidate_rows, normalize, occurrence_counts
from tasks.query.temporal import decay_scores
from tasks.query.view import GenerationView, best_rows, first_rows, max_pool, top_rows
from tasks.store.location import Location, open_location

log = logging.getLogger(__name__)


QUERY_CACHE = 8192  # query vectors kept per embedding space
FETCH_BATCH = 4096  # rows whose text one read fetches (substring verification)
# chunks per wanted document in the dense channel's first search: for k = 100 documents, the
# 300 nearest chunks held 100 documents for all 590 development questions on the shared corpus
# (8 chunks a document) and for 60 of them at 1M chunks, at 100 % and 1 % (none widened)
DOC_FANOUT = 3
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


class NoServingGeneration(LookupError):
    """Nothing has been published yet, so there is nothing to search."""


class Retriever:
    def __init__(self, *, generation: str, space_id: str, view: GenerationView,
                 lance_table, embed_queries: Callable[[list[str]], np.ndarray],
                 principal: Principal,
                 retrieval: RetrievalSettings, index_dir: Location | Path | None,
                 excluded_doc_ids: Iterable[str] = (),
                 dense_plan: dense_mod.DensePlan = dense_mod.DensePlan(),
                 contract: IndexContract | None = None,
                 index_settings: IndexSettings | None = None,
                 index_flags: Iterable[str] = (), as_of: datetime | None = None,
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
        self._index_dir = open_location(index_dir) if isinstance(index_dir, Path) else index_dir
        self._contract = contract
        self._index_settings = index_settings or IndexSettings()
        self.dense_plan = dense_plan
        # What the evidence package must say about how this generation was searched.
        self.index_flags: list[str] = list(index_flags)
        # who (tenant, groups), what (tombstones) and when (validity at the query time)
        self._access = allowed_set(view, principal, excluded_doc_ids, as_of)
        self._corpora: list[str] | None = None  # the sub-corpora this principal sees
        self._first = first_rows(view)
        self._lexical: PostingsIndex | None = None
        # BM25 statistics of the allowed set, for the mask they were computed on (the mask moves
        # when a validity bound passes, and a hidden chunk must not weigh on any score)
        self._stats: tuple[np.ndarray, tuple[int, float]] | None = None
        self._lock = threading.Lock()  # lazy index loads happen once under concurrent queries
        log.info("retriever %s for %s: %d of %d chunks allowed", generation,
                 principal.principal_id, self._access.count, len(view))

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
        from tasks.store.lance_store import open_generation_table, serving_session
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
        from tasks.store.integrity import verify_once

        verify_once(layout, gen)  # a torn or changed file refuses the generation, never serves
        # The encoder follows the generation (promotion and rollback switch both together);
        # an encoder configured explicitly must match it, or the query is refused below.
        chosen = settings.embedding
        if "model" not in settings.embedding.model_fields_set:
            chosen = settings.embedding.model_copy(update={"model": manifest.embedding_model})
        embedder = query_encoder(layout.encoders, chosen, manifest.embedding_space) \
            if chosen.model == manifest.embedding_model else load_embedder(chosen)
        if embedder.space.space_id != manifest.embedding_space.space_id:
            raise EmbeddingSpaceMismatch(
                f"generation {gen} was embedded with {manifest.embedding_space.model_name} "
                f"(space {manifest.embedding_space.space_id}) but the query encoder is "
                f"{embedder.space.model_name} (space {embedder.space.space_id}); set "
                "MABILLON_EMBEDDING__MODEL to the generation's model or query another generation")
        if excluded_doc_ids is None:
            from tasks.store.tombstones import read_tombstones

            excluded_doc_ids = read_tombstones(layout).doc_ids
        table = open_generation_table(layout, gen, serving_session(settings.index.cache_mb))
        view = _load_view(str(layout.lance), gen, table)
        plan, flags = _dense_plan(gen, table, manifest.indexes, settings.index)
        return cls(generation=gen, space_id=manifest.embedding_space.space_id, view=view,
                   lance_table=table, embed_queries=embedder.embed_queries,
                   principal=principal, retrieval=settings.retrieval,
                   index_dir=layout.index_dir(gen), excluded_doc_ids=excluded_doc_ids,
                   dense_plan=plan, contract=manifest.indexes, index_settings=settings.index,
                   index_flags=flags, as_of=at, route=routed.route if routed else "requested")

    # shared ---------------------------------------------------------------------------------
    @property
    def view(self) -> GenerationView:
        return self._view

    @property
    def _allowed(self) -> np.ndarray:
        return self._access.mask

    @property
    def _where(self) -> str:
        return self._access.where

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

    def lexical(self) -> PostingsIndex:
        """The generation's lexical index for the configured analysis (opened once)."""
        with self._lock:
            if self._lexical is None:
                self._lexical = _lexical_index(self, self.params.stem, self.params.char_ngrams)
        return self._lexical

    def _statistics(self, index: PostingsIndex, mask: np.ndarray) -> tuple[int, float]:
        with self._lock:
            if self._stats is None or self._stats[0] is not mask:
                self._stats = (mask, index.statistics(mask))
            return self._stats[1]

    def bm25_scores(self, query: str) -> np.ndarray:
        """BM25 of every row (0 outside the allowed set), statistics of the allowed set: every
        posting of every term read (the reference of `bm25_top`, and for tools that need it)."""
        terms = analyze(query, stem=self.params.stem, ngrams=self.params.char_ngrams)
        index, mask = self.lexical(), self._allowed
        return index.scores(terms, mask, self.params.bm25_k1, self.params.bm25_b,
                            stats=self._statistics(index, mask))

    def bm25_top(self, query: str, target: np.ndarray, k: int,
                 docs: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Rows under `target` with their BM25 (statistics of the allowed set), holding the k
        best rows, or with `docs` the best rows of the k best documents; the rest score lower."""
        terms = analyze(query, stem=self.params.stem, ngrams=self.params.char_ngrams)
        index, mask = self.lexical(), self._allowed
        return index.top(terms, mask, target & mask, k, self.params.bm25_k1, self.params.bm25_b,
                         stats=self._statistics(index, mask),
                         doc_codes=self._view.doc_codes if docs else None)

    def _dense_rows(self, query: str, limit: int, mask: np.ndarray, corpus: str | None,
                    date_from: str | None, date_to: str | None) -> tuple[np.ndarray, np.ndarray]:
        if not query.strip() or limit <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        visible = int(mask.sum())
        if visible == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        where = dense_mod.filter_clause(self._where, corpus, date_from, date_to)
        vector = self.query_vector(query)
        if self.dense_plan.ann and not self.dense_plan.use_index(visible) \
                and EXACT_FEW_ALLOWED not in self.index_flags:
            # the planner's choice, not a fault: few allowed rows are searched exactly
            self.index_flags.append(EXACT_FEW_ALLOWED)
        try:
            row_ids, sims = dense_mod.search(self._lance, vector, where, min(limit, visible),
                                             self.dense_plan, visible)
        except (OSError, RuntimeError, ValueError) as exc:
            if not self.dense_plan.use_index(visible):
                raise
            # an index listed on the version but unreadable: exact search, flagged, or refusal
            message = f"generation {self.generation}: its vector index cannot be read ({exc})"
            if self._index_settings.on_missing == "error":
                raise IndexUnavailable(message + "; republish the generation, or set "
                                       "MABILLON_INDEX__ON_MISSING=exact") from exc
            log.error("%s; serving by exact search", message)
            self.dense_plan = dense_mod.DensePlan()
            self.index_flags.append("dense_index_unreadable_exact_search")
            try:
                row_ids, sims = dense_mod.search(self._lance, vector, where, min(limit, visible),
                                                 self.dense_plan, visible)
            except (OSError, RuntimeError, ValueError) as again:  # the table itself is damaged
                raise IndexUnavailable(f"generation {self.generation}: dense search fails even "
                                       f"without its vector index ({again}); republish it") from again
        rows = self._view.rows_of_row_ids(row_ids)
        keep = mask[rows]  # the prefilter already did this; a row outside it is a bug, not data
        if not keep.all():
            log.error("dense search returned %d rows outside the allowed set; dropped",
                      int((~keep).sum()))
        return rows[keep], sims[keep]

    # chunk channels -------------------------------------------------------------------------
    def bm25_chunks(self, query: str, k: int = 50, corpus: str | None = None,
                    date_from: str | None = None, date_to: str | None = None) -> list[Hit]:
        mask = self._view.filter_mask(self._allowed, corpus, date_from, date_to)
        rows, scores = best_rows(*self.bm25_top(query, mask, k), k)
        return self._view.chunk_hits(rows, scores)

    def dense_chunks(self, query: str, k: int = 50, corpus: str | None = None,
                     date_from: str | None = None, date_to: str | None = None) -> list[Hit]:
        mask = self._view.filter_mask(self._allowed, corpus, date_from, date_to)
        rows, sims = self._dense_rows(query, k, mask, corpus, date_from, date_to)
        return self._view.chunk_hits(rows, sims)

    def date_range_chunks(self, date_from: str, date_to: str, k: int = 50,
                          corpus: str | None = None, query: str | None = None) -> list[Hit]:
        """Chunks of documents dated in [date_from, date_to]: by BM25 of `query` when given
        (chunks that do not match it follow), else by date, document and position."""
        v = self._view
        target = v.filter_mask(self._allowed, corpus, date_from, date_to)
        rows = np.flatnonzero(target)
        scores = np.zeros(rows.size, np.float32)
        if query and query.strip():  # rows outside the k best need no score: they follow by date
            scored, values = self.bm25_top(query, target, k)
            scores[np.searchsorted(rows, scored)] = values
        order = np.lexsort((v.ordinal[rows], v.doc_codes[rows], v.days[rows], -scores))[:k]
        return v.chunk_hits(rows[order], scores[order])

    def substring_chunks(self, text: str, k: int = 50, corpus: str | None = None) -> list[Hit]:
        """Chunks containing `text` (case, accents and spacing ignored), most occurrences first.

        Candidate rows come from the folded word tokens of the lexical index; only their texts
        are read (in batches) and counted, so no folded copy of the generation is kept."""
        needle = normalize(text)
        if not needle:
            return []
        mask = self._view.filter_mask(self._allowed, corpus)
        cand = candidate_rows(needle, self.lexical().rows_with_token)
        rows = np.flatnonzero(mask) if cand is None else cand[mask[cand]].astype(np.int64)
        counts = np.zeros(len(self._view), np.float32)
        for start in range(0, rows.size, FETCH_BATCH):
            batch = rows[start:start + FETCH_BATCH]
            texts = self._view.fetch(batch, ["text"]).column("text").to_pylist()
            counts[batch] = occurrence_counts(texts, needle)
        rows, scores = top_rows(counts, mask, k)
        return self._view.chunk_hits(rows, scores)

    # document channels ----------------------------------------------------------------------
    def bm25_docs(self, query: str, k: int = 50, corpus: str | None = None) -> list[DocHit]:
        mask = self._view.filter_mask(self._allowed, corpus)
        rows, scores = self.bm25_top(query, mask, k, docs=True)
        return max_pool(self._view, rows, scores, k)

    def dense_docs(self, query: str, k: int = 50, corpus: str | None = None) -> list[DocHit]:
        """The k documents of the best chunks, from at most `dense_candidates` chunks.

        The k best documents by their best chunk are the first k distinct documents among the
        best chunks: once the L nearest chunks hold k documents, the chunks beyond them cannot
        change the answer. So a search of DOC_FANOUT·k chunks comes first, and a wider one
        (four times, up to `dense_candidates`) only if it held fewer than k documents."""
        mask = self._view.filter_mask(self._allowed, corpus)
        cap = min(int(mask.sum()), max(self.params.dense_candidates, k))
        limit = min(cap, DOC_FANOUT * k)
        while True:
            rows, sims = self._dense_rows(query, limit, mask, corpus, None, None)
            if limit >= cap or rows.size < limit or self._view.document_count(rows) >= k:
                return max_pool(self._view, rows, sims, k)
            limit = min(cap, 4 * limit)

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
        dense = _channel_pool().submit(self.dense_docs, semantic or query, depth, target_corpus)
        bm25 = self.bm25_docs(lexical or query, depth, target_corpus)
        # a dense failure is raised here, as it was when the channels ran one after the other
        rankings: dict[str, list[DocHit]] = {"bm25": bm25, "dense": dense.result()}
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
    def chunk(self, chunk_id: str) -> Hit:
        """A chunk's text and position; an unknown and a forbidden chunk look the same."""
        try:
            row = self._view.row_of(chunk_id)
        except KeyError:
            row = None
        if row is None or not self._allowed[row]:
            raise KeyError(f"no chunk {chunk_id!r} visible to {self.principal.principal_id} "
                           f"in generation {self.generation}")
        return self._view.chunk_hits(np.array([row]), np.zeros(1, np.float32))[0]

    def corpora(self) -> list[str]:
        # asked twice per warm start; a pass over every allowed row (6 ms at a million chunks)
        if self._corpora is None:
            self._corpora = self._view.corpora(self._allowed)
        return list(self._corpora)


# Process-wide caches keyed by generation: a view and an index are the same for every principal
# (the allowed set is applied at query time), and a generation never changes once published.
_VIEWS: dict[tuple[str, str, int], GenerationView] = {}
_QUERY_VECTORS: dict[str, OrderedDict[str, np.ndarray]] = {}
_QUERY_LOCK = threading.Lock()
# An ANN generation searched exactly because the principal's filter leaves at most
# `exact_below_allowed` rows (IndexSettings): exact, and cheaper than probing partitions.
EXACT_FEW_ALLOWED = "dense_exact_search_few_allowed_rows"
_LEXICAL: dict[tuple[str, str], PostingsIndex] = {}
_SCRATCH: dict[tuple[str, str], tempfile.TemporaryDirectory] = {}  # indexes of views without a home


def _load_view(lance_path: str, generation: str, table) -> GenerationView:
    # keyed by version too: a purge rewrites a generation and moves its tag to a new version
    key = (generation, lance_path, table.version)
    if key not in _VIEWS:
        _VIEWS[key] = GenerationView.from_lance(table)
        release_freed_memory()  # the metadata scan's buffers, freed but kept by the allocators
    return _VIEWS[key]


def _dense_plan(generation: str, table, contract: IndexContract | None,
                settings: IndexSettings) -> tuple[dense_mod.DensePlan, list[str]]:
    """Search as the manifest records: the ANN index when the generation has one (and it is
    really on the version), exact search otherwise."""
    if contract is None or contract.dense.search != "ann":
        return dense_mod.DensePlan(), []
    if has_dense_index(table, contract.dense):
        nprobes, refine_factor = search_defaults(contract.dense.algorithm, settings.nprobes,
                                                 settings.refine_factor)
        return dense_mod.DensePlan(ann=True, nprobes=nprobes, refine_factor=refine_factor,
                                   refine_rows=settings.refine_rows,
                                   partitions=int(contract.dense.params.get("num_partitions", 0)),
                                   rows=contract.dense.rows,
                                   exact_below_allowed=settings.exact_below_allowed), []
    message = (f"generation {generation}: its {contract.dense.algorithm} vector index "
               f"{contract.dense.name!r} is missing from the Lance version")
    if settings.on_missing == "error":
        raise IndexUnavailable(message + "; republish the generation, or set "
                               "MABILLON_INDEX__ON_MISSING=exact to serve it by exact search")
    log.error("%s; serving by exact search", message)
    return dense_mod.DensePlan(), ["dense_index_missing_exact_search"]


def _texts(view: GenerationView) -> Iterator[str]:
    for start in range(0, len(view), 50_000):
        rows = np.arange(start, min(start + 50_000, len(view)))
        yield from view.fetch(rows, ["text"]).column("text").to_pylist()


def _lexical_index(r: "Retriever", stem: bool, ngrams: int) -> PostingsIndex:
    """Open the generation's index for this analysis; build it where the generation records
    none for it (published before the index contract, or another analysis); a recorded one
    that is missing or unreadable is rebuilt from the generation's texts (flagged) or refused."""
    view = r.view
    digest = chunk_digest(view.chunk_ids)
    if r._index_dir is None:  # a view without a warehouse (tests, tools): a scratch folder
        key = (r.generation, f"{digest}-{stem}-{ngrams}")
        if key not in _LEXICAL:
            _SCRATCH[key] = tempfile.TemporaryDirectory(prefix="mabillon-lexical-")
            folder = open_location(_SCRATCH[key].name)
            build_index(folder, _texts(view), view.chunk_ids, stem, ngrams,
                        row_class=view.access_codes)
            _LEXICAL[key] = PostingsIndex.open(folder)
        return _LEXICAL[key]
    folder = lexical_folder(r._index_dir, stem, ngrams)
    key = (r.generation, folder.uri)
    if key in _LEXICAL and _LEXICAL[key].chunk_digest == digest:
        return _LEXICAL[key]
    recorded = r._contract.lexical if r._contract else None
    recorded = recorded if recorded and recorded.path == folder.name else None
    try:
        index = PostingsIndex.open(folder)
        if index.chunk_digest != digest:
            raise ValueError(f"it indexes other rows (digest {index.chunk_digest}, "
                             f"generation {digest})")
    except (FileNotFoundError, OSError, ValueError, KeyError) as exc:
        if recorded is not None:
            message = f"generation {r.generation}: lexical index {folder} is missing or unreadable ({exc})"
            if r._index_settings.on_missing == "error":
                raise IndexUnavailable(message + "; republish the generation, or set "
                                       "MABILLON_INDEX__ON_MISSING=exact to rebuild it") from exc
            log.error("%s; rebuilding it from the generation's texts", message)
            r.index_flags.append("lexical_index_rebuilt")
        build_index(folder, _texts(view), view.chunk_ids, stem, ngrams,
                    row_class=view.access_codes)
        index = PostingsIndex.open(folder)
    _LEXICAL[key] = index
    return index


def drop_caches(generation: str | None = None) -> None:
    """Forget in-process views and indexes (of one generation, or all). Deleting a generation's
    index directory drops the on-disk copy; this drops the in-memory one."""
    for cache in (_VIEWS, _LEXICAL, _SCRATCH):
        for key in [k for k in cache if generation is None or k[0] == generation]:
            del cache[key]
