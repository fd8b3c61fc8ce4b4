"""One generation as the channels read it: the same for every principal, never written.

`Searchable` holds the generation's compact row metadata (`view`), its lexical index (opened
once, postings read from disk per query term), its Lance version with the dense plan the
manifest records, and the query encoder with its vector cache. It holds no principal: the
allowed set is an argument of every search (`tasks.query.channels`).

Process-wide caches keyed by generation live here too: a view and an index are the same for
every principal (the allowed set is applied at query time), and a generation never changes once
published. Where its lexical index is missing the generation is served from a scratch index of
this process, never rebuilt inside the generation (`mabillon reindex` does that).
"""
from __future__ import annotations

import logging
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from schemas.indexes import IndexContract, IndexSettings, IndexUnavailable
from schemas.retrieval import RetrievalSettings
from tasks.heap import release_freed_memory
from tasks.index import dense_search
from tasks.index.analyzer import analyze
from tasks.index.dense_search import DensePlan
from tasks.index.lexical_build import build_index
from tasks.index.lexical_format import chunk_digest, lexical_folder
from tasks.index.postings import PostingsIndex
from tasks.query.view import GenerationView, first_rows
from tasks.store.location import Location, open_location

log = logging.getLogger(__name__)

QUERY_CACHE = 8192  # query vectors kept per embedding space
# An ANN generation searched exactly because the principal's filter leaves at most
# `exact_below_allowed` rows (IndexSettings): exact, and cheaper than probing partitions.
EXACT_FEW_ALLOWED = "dense_exact_search_few_allowed_rows"


class Searchable:
    def __init__(self, *, generation: str, space_id: str, view: GenerationView, lance_table,
                 embed_queries: Callable[[list[str]], np.ndarray], retrieval: RetrievalSettings,
                 index_dir: Location | Path | None, dense_plan: DensePlan = DensePlan(),
                 contract: IndexContract | None = None,
                 index_settings: IndexSettings | None = None, index_flags: Iterable[str] = ()):
        self.generation = generation
        self.space_id = space_id
        self.view = view
        self.lance = lance_table
        self.embed_queries = embed_queries
        self.params = retrieval
        # Query vectors depend only on the embedding space: shared by every retriever of it.
        self._qvecs = _QUERY_VECTORS.setdefault(space_id, OrderedDict())
        self.index_dir = open_location(index_dir) if isinstance(index_dir, Path) else index_dir
        self.contract = contract
        self.index_settings = index_settings or IndexSettings()
        self.dense_plan = dense_plan
        # What the evidence package must say about how this generation was searched.
        self.index_flags: list[str] = list(index_flags)
        self._first: np.ndarray | None = None
        self._lexical: PostingsIndex | None = None
        # BM25 statistics of the allowed set, for the mask they were computed on (the mask moves
        # when a validity bound passes, and a hidden chunk must not weigh on any score)
        self._stats: tuple[np.ndarray, tuple[int, float]] | None = None
        self._lock = threading.Lock()  # lazy index loads happen once under concurrent queries

    @property
    def first(self) -> np.ndarray:
        """Mask of each document's opening chunk (what the temporal channel cites)."""
        if self._first is None:
            self._first = first_rows(self.view)
        return self._first

    # query vectors ---------------------------------------------------------------------------
    def prime(self, queries: list[str]) -> None:
        """Embed queries in one batch ahead of their searches (an evaluation knows them all;
        one batch costs a fraction of one call per query)."""
        with _QUERY_LOCK:
            missing = list(dict.fromkeys(q for q in queries if q.strip() and q not in self._qvecs))
        for start in range(0, len(missing), 64):
            batch = missing[start:start + 64]
            vecs = self.embed_queries(batch)
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
            vec = self.embed_queries([query])[0]
            with _QUERY_LOCK:
                self._remember(query, vec)
        return vec

    # lexical ---------------------------------------------------------------------------------
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

    def bm25_scores(self, query: str, mask: np.ndarray) -> np.ndarray:
        """BM25 of every row (0 outside `mask`), statistics of `mask`: every posting of every
        term read (the reference of `bm25_top`, and for tools that need it)."""
        terms = analyze(query, stem=self.params.stem, ngrams=self.params.char_ngrams)
        index = self.lexical()
        return index.scores(terms, mask, self.params.bm25_k1, self.params.bm25_b,
                            stats=self._statistics(index, mask))

    def bm25_top(self, query: str, mask: np.ndarray, target: np.ndarray, k: int,
                 docs: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Rows under `target` with their BM25 (statistics of `mask`), holding the k best rows,
        or with `docs` the best rows of the k best documents; the rest score lower."""
        terms = analyze(query, stem=self.params.stem, ngrams=self.params.char_ngrams)
        index = self.lexical()
        return index.top(terms, mask, target & mask, k, self.params.bm25_k1, self.params.bm25_b,
                         stats=self._statistics(index, mask),
                         doc_codes=self.view.doc_codes if docs else None)

    # dense -----------------------------------------------------------------------------------
    def dense_rows(self, query: str, limit: int, mask: np.ndarray,
                   where: str) -> tuple[np.ndarray, np.ndarray]:
        """The `limit` nearest rows under `mask` (the same rows as the Lance filter `where`)."""
        if not query.strip() or limit <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        visible = int(mask.sum())
        if visible == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        vector = self.query_vector(query)
        if self.dense_plan.ann and not self.dense_plan.use_index(visible) \
                and EXACT_FEW_ALLOWED not in self.index_flags:
            # the planner's choice, not a fault: few allowed rows are searched exactly
            self.index_flags.append(EXACT_FEW_ALLOWED)
        try:
            row_ids, sims = dense_search.search(self.lance, vector, where, min(limit, visible),
                                                self.dense_plan, visible)
        except (OSError, RuntimeError, ValueError) as exc:
            if not self.dense_plan.use_index(visible):
                raise
            # an index listed on the version but unreadable: exact search, flagged, or refusal
            message = f"generation {self.generation}: its vector index cannot be read ({exc})"
            if self.index_settings.on_missing == "error":
                raise IndexUnavailable(message + "; republish the generation, or set "
                                       "MABILLON_INDEX__ON_MISSING=exact") from exc
            log.error("%s; serving by exact search", message)
            self.dense_plan = DensePlan()
            self.index_flags.append("dense_index_unreadable_exact_search")
            try:
                row_ids, sims = dense_search.search(self.lance, vector, where, min(limit, visible),
                                                    self.dense_plan, visible)
            except (OSError, RuntimeError, ValueError) as again:  # the table itself is damaged
                raise IndexUnavailable(f"generation {self.generation}: dense search fails even "
                                       f"without its vector index ({again}); republish it") from again
        rows = self.view.rows_of_row_ids(row_ids)
        keep = mask[rows]  # the prefilter already did this; a row outside it is a bug, not data
        if not keep.all():
            log.error("dense search returned %d rows outside the allowed set; dropped",
                      int((~keep).sum()))
        return rows[keep], sims[keep]


_VIEWS: dict[tuple[str, str, int], GenerationView] = {}
_QUERY_VECTORS: dict[str, OrderedDict[str, np.ndarray]] = {}
_QUERY_LOCK = threading.Lock()
_LEXICAL: dict[tuple[str, str], PostingsIndex] = {}
_SCRATCH: dict[tuple[str, str], tempfile.TemporaryDirectory] = {}  # indexes built by this process


def load_view(lance_path: str, generation: str, table) -> GenerationView:
    # keyed by version too: a purge rewrites a generation and moves its tag to a new version
    key = (generation, lance_path, table.version)
    if key not in _VIEWS:
        _VIEWS[key] = GenerationView.from_lance(table)
        release_freed_memory()  # the metadata scan's buffers, freed but kept by the allocators
    return _VIEWS[key]


def texts(view: GenerationView) -> Iterator[str]:
    """Every row's text, in row order, read in batches."""
    for start in range(0, len(view), 50_000):
        rows = np.arange(start, min(start + 50_000, len(view)))
        yield from view.fetch(rows, ["text"]).column("text").to_pylist()


def _lexical_index(r: Searchable, stem: bool, ngrams: int) -> PostingsIndex:
    """Open the generation's index for this analysis.

    The query side never writes into a published generation. Where the index is missing,
    unreadable or indexes other rows, the generation is served exactly from a scratch index this
    process builds from its texts — flagged `lexical_index_rebuilt` when the generation records
    that index, refused instead under `on_missing=error` — until an operator rebuilds it in
    place (`mabillon reindex GENERATION`). A generation that records no index for this analysis
    (published before the index contract, or another analysis configured) is served the same
    way, unflagged: nothing of it is damaged."""
    view = r.view
    digest = chunk_digest(view.chunk_ids)
    if r.index_dir is None:  # a view without a warehouse (tests, tools)
        return _scratch_index(r.generation, view, digest, stem, ngrams)
    folder = lexical_folder(r.index_dir, stem, ngrams)
    key = (r.generation, folder.uri)
    if key in _LEXICAL and _LEXICAL[key].chunk_digest == digest:
        return _LEXICAL[key]
    recorded = r.contract.lexical if r.contract else None
    recorded = recorded if recorded and recorded.path == folder.name else None
    try:
        index = PostingsIndex.open(folder)
        if index.chunk_digest != digest:
            raise ValueError(f"it indexes other rows (digest {index.chunk_digest}, "
                             f"generation {digest})")
    except (FileNotFoundError, OSError, ValueError, KeyError) as exc:
        rebuild = f"`mabillon reindex {r.generation}` rebuilds it in place"
        if recorded is None:
            log.warning("generation %s has no lexical index %s (%s); serving it from a scratch "
                        "index built from its texts; %s", r.generation, folder.name, exc, rebuild)
            return _scratch_index(r.generation, view, digest, stem, ngrams)
        message = f"generation {r.generation}: lexical index {folder} is missing or unreadable ({exc})"
        if r.index_settings.on_missing == "error":
            raise IndexUnavailable(f"{message}; {rebuild}, or set MABILLON_INDEX__ON_MISSING=exact "
                                   "to serve it from a scratch index") from exc
        log.error("%s; serving it from a scratch index built from the generation's texts; %s",
                  message, rebuild)
        r.index_flags.append("lexical_index_rebuilt")
        return _scratch_index(r.generation, view, digest, stem, ngrams)
    _LEXICAL[key] = index
    return index


def _scratch_index(generation: str, view: GenerationView, digest: str, stem: bool,
                   ngrams: int) -> PostingsIndex:
    """The view's index for this analysis in a temporary folder of this process (built once,
    removed with the process or by `drop_caches`), never in the warehouse."""
    key = (generation, f"{digest}-{stem}-{ngrams}")
    if key not in _LEXICAL:
        _SCRATCH[key] = tempfile.TemporaryDirectory(prefix="mabillon-lexical-")
        folder = open_location(_SCRATCH[key].name)
        build_index(folder, texts(view), view.chunk_ids, stem, ngrams, row_class=view.access_codes)
        _LEXICAL[key] = PostingsIndex.open(folder)
    return _LEXICAL[key]


def drop_caches(generation: str | None = None) -> None:
    """Forget in-process views and indexes (of one generation, or all). Deleting a generation's
    index directory drops the on-disk copy; this drops the in-memory one."""
    for cache in (_VIEWS, _LEXICAL, _SCRATCH):
        for key in [k for k in cache if generation is None or k[0] == generation]:
            del cache[key]
