"""A generation's lexical index opened for queries (`PostingsIndex`): exact BM25 with the
statistics of the rows a principal may see, by exhaustive scoring (`scores`) or by a bounded
walk that skips postings which cannot reach the k best (`top`), and the folded-token lookups
of exact substring search. Format: `tasks.index.lexical_format`; compiled loops:
`tasks.index.lexical_kernels`.
"""
from __future__ import annotations

import io
import json
import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.index.lexical_format import CLASS_DF, FORMAT, PRUNING, ROW, TERM_STATS, TF, term_hashes
from tasks.index.lexical_kernels import (accumulate, accumulate_above, add_where_held, cannot_reach,
                                         count_allowed, count_sorted_hits, kth_largest, reaching)
from tasks.store.location import Location

# Rows a principal may not see inside its own access classes, above which document frequencies
# are counted on the postings rather than corrected by lookups
MAX_CORRECTED_ROWS = 65_536


class PostingsIndex:
    """A generation's lexical index, opened for queries: small arrays in memory, postings read
    per term with positioned reads (the OS page cache, not this process, keeps hot ranges)."""

    def __init__(self, folder: Location, meta: dict, indptr: np.ndarray, hashes: np.ndarray,
                 columns: np.ndarray, lengths: np.ndarray):
        self.folder = folder
        self.meta = meta
        self.indptr, self.hashes, self.columns, self.lengths = indptr, hashes, columns, lengths
        self._rows = folder.fs.open_input_file((folder / "rows.bin").path)
        self._tf = folder.fs.open_input_file((folder / "tf.bin").path)
        self._tokens: pa.Table | None = None
        self._lock = threading.Lock()
        self.row_class: np.ndarray | None = None
        self._stats_file = self._class_df = None
        self._mapped: tuple[np.ndarray, np.ndarray] | None = None
        self._excluded: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._rows_as_docs: np.ndarray | None = None

    @classmethod
    def open(cls, folder: Location) -> "PostingsIndex":
        meta = json.loads((folder / "meta.json").read_text())
        if meta.get("format") != FORMAT:
            raise ValueError(f"{folder}: index format {meta.get('format')!r}, expected {FORMAT}")
        arrays = {n: np.load(io.BytesIO((folder / f"{n}.npy").read_bytes()), allow_pickle=False)
                  for n in ("indptr", "hashes", "columns", "lengths")}
        index = cls(folder, meta, **arrays)
        nnz = int(index.indptr[-1])
        sizes = (index._rows.size(), index._tf.size())
        if sizes != (nnz * ROW.itemsize, nnz * TF.itemsize) or index.lengths.size != meta["rows"]:
            raise ValueError(f"{folder}: postings files hold {sizes} bytes, expected {nnz} postings")
        if meta.get("pruning") == PRUNING:
            index._open_pruning()
        return index

    def _open_pruning(self) -> None:
        folder = self.folder
        self.row_class = np.load(io.BytesIO((folder / "row_class.npy").read_bytes()), allow_pickle=False)
        self._stats_file = folder.fs.open_input_file((folder / "term_stats.bin").path)
        self._class_df = folder.fs.open_input_file((folder / "class_df.bin").path)
        terms = self.indptr.size - 1
        if self.row_class.size != self.rows or self._stats_file.size() != terms * TERM_STATS.itemsize:
            raise ValueError(f"{self.folder}: access-class statistics do not match the postings")
        if folder.is_local:
            # memory-mapped postings: a lookup of a few rows in a long list touches a few pages
            nnz = int(self.indptr[-1])
            self._mapped = (np.memmap((folder / "rows.bin").local_path, ROW, "r", shape=(nnz,)) if nnz else np.zeros(0, ROW),
                            np.memmap((folder / "tf.bin").local_path, TF, "r", shape=(nnz,)) if nnz else np.zeros(0, TF))

    @property
    def prunable(self) -> bool:
        return self.row_class is not None

    @property
    def rows(self) -> int:
        return int(self.meta["rows"])

    @property
    def chunk_digest(self) -> str:
        return self.meta["chunk_digest"]

    def column_of(self, terms: list[str]) -> np.ndarray:
        """Each term's column, -1 where the index does not hold it."""
        if not terms:
            return np.zeros(0, np.int64)
        h = term_hashes(terms)
        pos = np.minimum(np.searchsorted(self.hashes, h), max(self.hashes.size - 1, 0))
        found = self.hashes.size > 0
        hit = (self.hashes[pos] == h) if found else np.zeros(len(terms), bool)
        return np.where(hit, self.columns[pos] if found else -1, -1).astype(np.int64)

    def postings(self, column: int, tf: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """(rows, term frequencies) of one term, read from disk."""
        lo, hi = int(self.indptr[column]), int(self.indptr[column + 1])
        if hi <= lo:
            return np.zeros(0, ROW), (np.zeros(0, TF) if tf else None)
        rows = np.frombuffer(self._rows.read_at((hi - lo) * ROW.itemsize, lo * ROW.itemsize), ROW)
        tfs = np.frombuffer(self._tf.read_at((hi - lo) * TF.itemsize, lo * TF.itemsize), TF) if tf else None
        return rows, tfs

    def _postings_view(self, column: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and tfs of one term without reading them (mapped) where the index is local."""
        if self._mapped is None:
            return self.postings(column)
        lo, hi = int(self.indptr[column]), int(self.indptr[column + 1])
        return np.asarray(self._mapped[0][lo:hi]), np.asarray(self._mapped[1][lo:hi])

    def _term_record(self, column: int) -> np.void:
        raw = self._stats_file.read_at(TERM_STATS.itemsize, column * TERM_STATS.itemsize)
        return np.frombuffer(raw, TERM_STATS)[0]

    def _hidden_rows(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(classes the mask's rows fall in, the rows of those classes outside the mask)."""
        with self._lock:
            cached = self._excluded.get(id(mask))
            if cached is not None and cached[0] is mask:
                return cached[1], cached[2]
        n_classes = max(int(self.meta.get("classes", 0)), 1)
        allowed = np.zeros(n_classes, bool)
        allowed[np.unique(self.row_class[mask])] = True
        hidden = np.flatnonzero(allowed[self.row_class] & ~mask).astype(ROW)
        with self._lock:  # a few principals' masks at once (a served process asks for many)
            if len(self._excluded) >= 8:
                self._excluded.pop(next(iter(self._excluded)))
            self._excluded[id(mask)] = (mask, allowed, hidden)
        return allowed, hidden

    def document_frequency(self, column: int, record: np.void, mask: np.ndarray) -> int:
        """Rows under `mask` holding the term: per-class counts of the mask's classes, less the
        rows of those classes the mask leaves out (looked up, or counted where they are many)."""
        allowed, hidden = self._hidden_rows(mask)
        lo, hi = int(record["lo"]), int(record["hi"])
        if hi <= lo:
            return 0
        per_class = np.frombuffer(self._class_df.read_at((hi - lo) * CLASS_DF.itemsize,
                                                         lo * CLASS_DF.itemsize), CLASS_DF)
        df = int(per_class["n"][allowed[per_class["cls"]]].sum())
        if hidden.size == 0 or df == 0:
            return df
        rows, _ = self._postings_view(column)
        if hidden.size > MAX_CORRECTED_ROWS:
            return count_allowed(rows, mask)
        return df - count_sorted_hits(rows, hidden)

    def top(self, query_terms: list[str], mask: np.ndarray, target: np.ndarray, k: int,
            k1: float = 1.2, b: float = 0.75, stats: tuple[int, float] | None = None,
            doc_codes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rows under `target` (⊆ `mask`) with their exact BM25 (statistics of `mask`), holding
        at least the k best rows — or, with `doc_codes`, the best row of each of the k best
        documents (max-pooled). Not every matching row: the others score below those.

        Terms go by their largest possible contribution. Rare terms are read whole; once what
        the remaining terms could add to a row not yet seen cannot reach the k-th best score,
        they are looked up only for the rows that can still enter the top (a safe early stop:
        the k best are the same as exhaustive scoring's, to float rounding)."""
        n, avgdl = stats or self.statistics(mask)
        if n == 0 or not query_terms or k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if not self.prunable:
            scores = self.scores(query_terms, mask, k1, b, (n, avgdl))
            rows = np.flatnonzero(target & (scores > 0))
            return rows, scores[rows]
        terms, qtf = np.unique(query_terms, return_counts=True)
        plan = []
        for col, q in zip(self.column_of(terms.tolist()).tolist(), qtf.tolist()):
            if col < 0:
                continue
            record = self._term_record(col)
            df = self.document_frequency(col, record, mask)
            if df == 0:
                continue
            weight = q * float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))
            t = float(record["maxtf"])
            bound = weight * t * (k1 + 1.0) / (t + k1 * (1.0 - b + b * float(record["minlen"]) / avgdl))
            plan.append((bound, col, weight))
        plan.sort(key=lambda p: (-p[0], p[1]))
        rest = np.cumsum([p[0] for p in plan][::-1])[::-1].tolist() + [0.0]
        acc = np.zeros(self.rows, np.float32)
        # Each document's (each row's, without documents) best partial score, raised only by
        # rows scoring above `floor`, a known lower bound of the final k-th best: below it a
        # row can change no threshold, and most postings of the common terms are below it.
        # Every recorded value is a real partial score, so their k-th largest is a lower bound.
        codes = doc_codes if doc_codes is not None else self._identity()
        n_docs = int(codes.max()) + 1 if codes.size else 0
        best = np.zeros(n_docs, np.float32)
        docs = np.empty(n_docs, np.int64)
        n_seen_docs = 0
        floor = 0.0
        stop = len(plan)
        for i, (_, col, weight) in enumerate(plan):
            length = int(self.indptr[col + 1] - self.indptr[col])
            if i and length >= max(4096, n_seen_docs // 4) and n_seen_docs >= k:
                floor = max(floor, kth_largest(best[docs[:n_seen_docs]], k))
                if cannot_reach(rest[i], floor):
                    stop = i
                    break
            # read whole: copied out of the page cache rather than mapped, so the lists a
            # process has walked do not stay in its resident set (the mapping is for lookups)
            rows, tf = self.postings(col)
            n_seen_docs = accumulate_above(rows, tf, target, self.lengths, acc, weight, k1, b,
                                            avgdl, floor, codes, best, docs, n_seen_docs)
        theta = max(floor, kth_largest(best[docs[:n_seen_docs]], k))
        # the rows that can still reach the k-th best once the unread terms are added
        rows = reaching(acc, rest[stop], theta)
        if stop == len(plan):
            return rows, acc[rows]
        kept = rows.size
        for i in range(stop, len(plan)):
            # looked up for the candidates only, which are kept while they can still reach
            # the threshold with what the terms after this one could add (fewer as it shrinks)
            _, col, weight = plan[i]
            postings, tf = self._postings_view(col)
            kept, n_seen_docs = add_where_held(postings, tf, rows, kept, self.lengths, acc,
                                                weight, k1, b, avgdl, rest[i + 1], theta, codes,
                                                best, docs, n_seen_docs)
            theta = max(theta, kth_largest(best[docs[:n_seen_docs]], k))
        rows = rows[:kept]
        return rows, acc[rows]

    def _identity(self) -> np.ndarray:
        """Row → itself: the walk's "documents" when it ranks rows."""
        with self._lock:
            if self._rows_as_docs is None:
                self._rows_as_docs = np.arange(self.rows, dtype=np.int32)
            return self._rows_as_docs

    def statistics(self, mask: np.ndarray) -> tuple[int, float]:
        """(allowed rows, their average length): BM25's corpus statistics for this mask."""
        n = int(mask.sum())
        return n, (float(self.lengths[mask].mean()) or 1.0) if n else 1.0

    def scores(self, query_terms: list[str], mask: np.ndarray, k1: float = 1.2, b: float = 0.75,
               stats: tuple[int, float] | None = None) -> np.ndarray:
        """BM25 of every row (0 outside `mask`), statistics of `mask` only; the formula of the
        reference scorer (`tests/query/reference_bm25.py`), in one compiled pass per term."""
        out = np.zeros(self.rows, dtype=np.float32)
        n, avgdl = stats or self.statistics(mask)
        if n == 0 or not query_terms:
            return out
        terms, qtf = np.unique(query_terms, return_counts=True)
        for col, q in zip(self.column_of(terms.tolist()).tolist(), qtf.tolist()):
            if col < 0:
                continue
            rows, tf = self.postings(col)
            df = count_allowed(rows, mask)
            if df:
                idf = float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))
                accumulate(rows, tf, mask, self.lengths, out, q * idf, k1, b, avgdl)
        return out

    # substring candidates -----------------------------------------------------------------
    def _token_table(self) -> pa.Table:
        with self._lock:
            if self._tokens is None:
                self._tokens = (self.folder / "tokens.parquet").read_parquet()
            return self._tokens

    def rows_with_token(self, token: str, how: str) -> np.ndarray:
        """Rows holding a folded word token equal to / starting with / ending with / containing
        `token` (how: exact | prefix | suffix | infix), as a sorted unique array."""
        table = self._token_table()
        col = table.column("token")
        if how == "exact":
            match = pc.equal(col, token)
        elif how == "prefix":
            match = pc.starts_with(col, token)
        elif how == "suffix":
            match = pc.ends_with(col, token)
        else:
            match = pc.match_substring(col, token)
        cols = table.column("column").filter(match).to_numpy()
        if cols.size == 0:
            return np.zeros(0, np.int32)
        return np.unique(np.concatenate([self.postings(int(c), tf=False)[0] for c in cols]))
