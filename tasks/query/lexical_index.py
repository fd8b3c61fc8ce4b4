"""The lexical index of a generation: BM25 postings on disk, read term by term.

Why not LanceDB's native FTS, bm25s or tantivy: all three bake corpus-wide statistics (document
frequency, average length) into their scores, so a forbidden document shifts the scores of the
allowed ones; one index per tenant would fix that between tenants but not between groups of one
tenant. This index stores raw term frequencies, so BM25 statistics are taken over exactly the
rows the principal may see, at query time, as the in-memory channel did (scores are identical).

Files, one folder per generation and analysis, each written whole (`meta.json` last: a reader
sees a complete index or none), read through the warehouse Location (local disk or S3):

- `rows.bin` (int32) and `tf.bin` (uint16): the postings, grouped by term, rows ascending
  within a term — read with positioned reads, one range per query term; never loaded whole.
- `indptr.npy` (int64, terms + 1), `hashes.npy` (uint64, sorted 64-bit term hashes),
  `columns.npy` (int32, the term column of each sorted hash), `lengths.npy` (float32 per row).
  Only these are held in memory: 20 bytes per term and 4 per row.
- `tokens.parquet`: the folded word tokens of the texts (``=`` terms, not scored) and their
  columns, so exact substring search can narrow its candidates without holding any text.
- `row_class.npy` (int32 per row, held in memory), `term_stats.bin` (per term: its range in
  `class_df.bin`, its largest tf and the shortest row holding it) and `class_df.bin` (per term
  and access class, the rows of that class holding it): what lets a query know each term's
  document frequency *over the principal's rows* before reading its postings, and so skip most
  of them (`top`). Indexes written before these files are scored exhaustively.

Why the statistics stay per principal and what that costs: document frequencies are a sum over
the access classes the principal's rows fall in, corrected for the rows of those classes it may
not see (tombstoned, outside their validity): a forbidden chunk still shifts no score. The
correction reads the postings of a term only where those rows are many (then the term is counted
exhaustively, as before).

Row numbers are positions in the generation's Lance table version; `chunk_digest` ties the
index to that row order.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp
from numba import njit

from schemas.indexes import LexicalBuild
from tasks.query.analysis import analyze_word, analyzer_id, words
from tasks.query.substring import TOKEN, normalize
from tasks.store.location import Location

log = logging.getLogger(__name__)

FORMAT = "postings-v1"
PRUNING = "class-df-v1"  # the optional files that let `top` skip postings
ROW, TF = np.dtype("<i4"), np.dtype("<u2")
TERM_STATS = np.dtype([("lo", "<i8"), ("hi", "<i8"), ("minlen", "<f4"), ("maxtf", "<u2"), ("pad", "<u2")])
CLASS_DF = np.dtype([("cls", "<i4"), ("n", "<i4")])
# Rows a principal may not see inside its own access classes, above which document frequencies
# are counted on the postings rather than corrected by lookups
MAX_CORRECTED_ROWS = 65_536
TOKEN_PREFIX = "="  # exact folded word tokens (substring candidates); never a BM25 term


def term_hashes(terms: Iterable[str]) -> np.ndarray:
    """Stable 64-bit hashes (BLAKE2b) of terms; collisions are refused at build time."""
    return np.fromiter((int.from_bytes(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest(), "little")
                        for t in terms), dtype=np.uint64)


def chunk_digest(chunk_ids: pa.Array | pa.ChunkedArray) -> str:
    """Digest of the chunk ids in row order (an index belongs to one row order)."""
    arr = chunk_ids.combine_chunks() if isinstance(chunk_ids, pa.ChunkedArray) else chunk_ids
    arr = pa.concat_arrays([arr.cast(pa.large_string())]) if len(arr) else pa.array([], pa.large_string())
    h = hashlib.sha256()
    _, offsets, data = arr.buffers()
    if offsets is not None:
        h.update(memoryview(offsets)[arr.offset * 8:(arr.offset + len(arr) + 1) * 8])
    if data is not None:
        h.update(memoryview(data))
    return h.hexdigest()[:16]


class _Builder:
    """Terms of many texts to CSR rows; each distinct word is analysed once."""

    def __init__(self, stem: bool, ngrams: int):
        self.stem, self.ngrams = stem, ngrams
        self.vocab: dict[str, int] = {}
        self._word_terms: dict[str, np.ndarray] = {}
        self._ids: list[np.ndarray] = []
        self._tfs: list[np.ndarray] = []
        self.counts: list[int] = []
        self.lengths: list[int] = []

    def _terms_of(self, word: str) -> np.ndarray:
        ids = self._word_terms.get(word)
        if ids is None:
            vocab = self.vocab
            ids = np.fromiter((vocab.setdefault(t, len(vocab))
                               for t in analyze_word(word, self.stem, self.ngrams)), dtype=np.int32)
            self._word_terms[word] = ids
        return ids

    def add(self, text: str) -> None:
        ws = words(text)
        parts = [self._terms_of(w) for w in ws]
        scored = sum(p.size for p in parts)
        vocab = self.vocab
        tokens = set(TOKEN.findall(normalize(text)))
        parts.append(np.fromiter((vocab.setdefault(TOKEN_PREFIX + t, len(vocab)) for t in tokens),
                                 dtype=np.int32, count=len(tokens)))
        ids, tf = np.unique(np.concatenate(parts) if parts else np.zeros(0, np.int32), return_counts=True)
        self._ids.append(ids.astype(np.int32))
        self._tfs.append(np.minimum(tf, 65535).astype(np.uint16))
        self.counts.append(ids.size)
        self.lengths.append(scored)

    def matrix(self) -> sp.csc_matrix:
        indptr = np.zeros(len(self.counts) + 1, np.int64)
        np.cumsum(self.counts, out=indptr[1:])
        ids = np.concatenate(self._ids) if self._ids else np.zeros(0, np.int32)
        tfs = np.concatenate(self._tfs) if self._tfs else np.zeros(0, np.uint16)
        self._ids, self._tfs, self._word_terms = [], [], {}
        csr = sp.csr_matrix((tfs, ids, indptr), shape=(len(self.counts), len(self.vocab)))
        return csr.tocsc()


def build_index(folder: Location, texts: Iterable[str], chunk_ids: pa.Array | pa.ChunkedArray,
                stem: bool = True, ngrams: int = 0, progress=None,
                row_class: np.ndarray | None = None) -> LexicalBuild:
    """Analyse every text once and write the index files under `folder`.

    `row_class` (int per row, negative for rows without a policy) groups rows by access class
    (`tasks.access.policy.access_of`); without it every row is one class, which stays exact but
    makes the document frequencies of a restricted principal a count over the postings."""
    started = time.perf_counter()
    builder = _Builder(stem, ngrams)
    for n, text in enumerate(texts, 1):
        builder.add(text or "")
        if progress is not None and n % 10_000 == 0:
            progress(n)
    lengths = np.asarray(builder.lengths, np.float32)
    csc = builder.matrix()
    terms = list(builder.vocab)
    del builder.vocab
    hashes = term_hashes(terms)
    order = np.argsort(hashes, kind="stable")
    sorted_hashes = hashes[order]
    if sorted_hashes.size > 1 and (np.diff(sorted_hashes) == 0).any():
        raise RuntimeError("two index terms share a 64-bit hash; change ANALYZER_VERSION to re-salt")
    token_cols = np.fromiter((i for i, t in enumerate(terms) if t.startswith(TOKEN_PREFIX)), np.int32)
    tokens = pa.table({"token": pa.array([terms[i][1:] for i in token_cols], pa.string()),
                       "column": pa.array(token_cols, pa.int32())}).sort_by("token")
    del terms
    folder.remove_tree()
    size = 0
    size += _write_array(folder / "rows.bin", csc.indices.astype(ROW, copy=False))
    size += _write_array(folder / "tf.bin", csc.data.astype(TF, copy=False))
    for name, arr in (("indptr", csc.indptr.astype(np.int64)), ("hashes", sorted_hashes),
                      ("columns", order.astype(np.int32)),
                      ("lengths", lengths)):
        size += _write_npy(folder / f"{name}.npy", arr)
    (folder / "tokens.parquet").write_parquet(tokens)
    classes = _dense_classes(row_class, csc.shape[0])
    stats, class_df = _term_statistics(csc, classes, lengths)
    size += _write_array(folder / "term_stats.bin", stats)
    size += _write_array(folder / "class_df.bin", class_df)
    size += _write_npy(folder / "row_class.npy", classes)
    info = LexicalBuild(rows=csc.shape[0], terms=csc.shape[1], postings=int(csc.nnz),
                     size_bytes=size, chunk_digest=chunk_digest(chunk_ids),
                     build_s=round(time.perf_counter() - started, 3))
    meta = {"format": FORMAT, "analyzer": analyzer_id(stem, ngrams), "stem": stem, "char_ngrams": ngrams,
            "rows": info.rows, "terms": info.terms, "postings": info.postings,
            "chunk_digest": info.chunk_digest, "build_s": info.build_s, "pruning": PRUNING,
            "classes": int(classes.max()) + 1 if classes.size else 0}
    (folder / "meta.json").write_text(json.dumps(meta))
    return info


def _dense_classes(row_class: np.ndarray | None, rows: int) -> np.ndarray:
    """Access classes renumbered 0..C-1, rows without a policy one class of their own."""
    if row_class is None:
        return np.zeros(rows, np.int32)
    row_class = np.asarray(row_class)
    if row_class.size != rows:
        raise ValueError(f"{row_class.size} access classes for {rows} rows")
    _, dense = np.unique(np.where(row_class < 0, -1, row_class), return_inverse=True)
    return dense.astype(np.int32)


def _term_statistics(csc: sp.csc_matrix, classes: np.ndarray, lengths: np.ndarray,
                     step: int = 1 << 24) -> tuple[np.ndarray, np.ndarray]:
    """Per term: rows holding it per access class, its largest tf, its shortest row (the bound
    of its BM25 contribution). Walked in slices of whole terms, so memory stays a few slices."""
    terms = csc.shape[1]
    indptr = csc.indptr
    stats = np.zeros(terms, TERM_STATS)
    pieces, offset, start = [], 0, 0
    n_classes = int(classes.max()) + 1 if classes.size else 1
    while start < terms:
        stop = max(int(np.searchsorted(indptr, indptr[start] + step, side="right")) - 1, start + 1)
        stop = min(stop, terms)
        lo, hi = int(indptr[start]), int(indptr[stop])
        rows = csc.indices[lo:hi]
        counts = np.diff(indptr[start:stop + 1])
        term = np.repeat(np.arange(start, stop, dtype=np.int64), counts)
        key, n = np.unique(term * n_classes + classes[rows], return_counts=True)
        owner = key // n_classes
        bounds = np.searchsorted(owner, np.arange(start, stop + 1))
        stats["lo"][start:stop] = offset + bounds[:-1]
        stats["hi"][start:stop] = offset + bounds[1:]
        starts = (indptr[start:stop] - lo)[counts > 0]
        nonempty = np.flatnonzero(counts > 0) + start
        stats["maxtf"][nonempty] = np.maximum.reduceat(csc.data[lo:hi], starts)
        stats["minlen"][nonempty] = np.minimum.reduceat(lengths[rows], starts)
        piece = np.zeros(key.size, CLASS_DF)
        piece["cls"], piece["n"] = key % n_classes, n
        pieces.append(piece)
        offset += key.size
        start = stop
    return stats, (np.concatenate(pieces) if pieces else np.zeros(0, CLASS_DF))


def _write_npy(location: Location, arr: np.ndarray) -> int:
    buffer = io.BytesIO()
    np.save(buffer, arr, allow_pickle=False)
    data = buffer.getvalue()
    location.write_bytes(data)
    return len(data)


def _write_array(location: Location, arr: np.ndarray, step: int = 1 << 24) -> int:
    """Raw little-endian values, written in pieces (an index can be larger than memory twice)."""
    def pieces() -> Iterator[bytes]:
        for lo in range(0, arr.size, step):
            yield arr[lo:lo + step].tobytes()
    return location.write_chunks(pieces())


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
            return _count_allowed(rows, mask)
        return df - _count_sorted_hits(rows, hidden)

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
                floor = max(floor, _kth_largest(best[docs[:n_seen_docs]], k))
                if _cannot_reach(rest[i], floor):
                    stop = i
                    break
            # read whole: copied out of the page cache rather than mapped, so the lists a
            # process has walked do not stay in its resident set (the mapping is for lookups)
            rows, tf = self.postings(col)
            n_seen_docs = _accumulate_above(rows, tf, target, self.lengths, acc, weight, k1, b,
                                            avgdl, floor, codes, best, docs, n_seen_docs)
        theta = max(floor, _kth_largest(best[docs[:n_seen_docs]], k))
        # the rows that can still reach the k-th best once the unread terms are added
        rows = _reaching(acc, rest[stop], theta)
        if stop == len(plan):
            return rows, acc[rows]
        kept = rows.size
        for i in range(stop, len(plan)):
            # looked up for the candidates only, which are kept while they can still reach
            # the threshold with what the terms after this one could add (fewer as it shrinks)
            _, col, weight = plan[i]
            postings, tf = self._postings_view(col)
            kept, n_seen_docs = _add_where_held(postings, tf, rows, kept, self.lengths, acc,
                                                weight, k1, b, avgdl, rest[i + 1], theta, codes,
                                                best, docs, n_seen_docs)
            theta = max(theta, _kth_largest(best[docs[:n_seen_docs]], k))
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
        in-memory `Bm25Index` (`term_scores`), in one compiled pass per term."""
        out = np.zeros(self.rows, dtype=np.float32)
        n, avgdl = stats or self.statistics(mask)
        if n == 0 or not query_terms:
            return out
        terms, qtf = np.unique(query_terms, return_counts=True)
        for col, q in zip(self.column_of(terms.tolist()).tolist(), qtf.tolist()):
            if col < 0:
                continue
            rows, tf = self.postings(col)
            df = _count_allowed(rows, mask)
            if df:
                idf = float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))
                _accumulate(rows, tf, mask, self.lengths, out, q * idf, k1, b, avgdl)
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


@njit(cache=True, nogil=True)
def _count_allowed(rows, mask):  # pragma: no cover - compiled
    count = 0
    for r in rows:
        if mask[r]:
            count += 1
    return count


@njit(cache=True, nogil=True)
def _accumulate(rows, tf, mask, lengths, out, weight, k1, b, avgdl):  # pragma: no cover - compiled
    """out[r] += weight · tf(k1+1) / (tf + k1(1 − b + b·len/avgdl)) for allowed r: `term_scores`
    without temporaries (with weight = q·idf)."""
    for i in range(rows.size):
        r = rows[i]
        if mask[r]:
            t = np.float32(tf[i])
            out[r] += weight * t * (k1 + 1.0) / (t + k1 * (1.0 - b + b * lengths[r] / avgdl))


def _cannot_reach(bound, theta: float):
    """`bound` < `theta` with room for float32 rounding (a kept row costs a lookup; a dropped
    one that belonged would change the answer)."""
    return np.asarray(bound) * (1.0 + 1e-4) + 1e-4 < theta


def _kth_largest(values: np.ndarray, k: int) -> float:
    """The k-th largest of `values`; 0 while there are fewer than k."""
    if values.size < k:
        return 0.0
    return float(np.partition(values, values.size - k)[values.size - k])


@njit(cache=True, nogil=True)
def _accumulate_above(rows, tf, mask, lengths, out, weight, k1, b, avgdl, floor, doc_codes, best,
                      docs, n_docs_seen):  # pragma: no cover - compiled
    """`_accumulate`, raising the best row score of each row's document in `best` where the
    row's new score is above `floor` (documents recorded for the first time go to `docs`)."""
    for i in range(rows.size):
        r = rows[i]
        if mask[r]:
            t = np.float32(tf[i])
            v = out[r] + weight * t * (k1 + 1.0) / (t + k1 * (1.0 - b + b * lengths[r] / avgdl))
            out[r] = v
            if v > floor:
                n_docs_seen = _raise_best(doc_codes[r], v, best, docs, n_docs_seen)
    return n_docs_seen


@njit(cache=True, nogil=True, inline="always")
def _raise_best(d, v, best, docs, n_docs_seen):  # pragma: no cover - compiled
    """best[d] = max(best[d], v), recording a document seen for the first time in `docs`."""
    held = best[d]
    if held == 0.0:
        docs[n_docs_seen] = d
        n_docs_seen += 1
    best[d] = max(held, v)  # no branch on the comparison: a coin toss per posting
    return n_docs_seen


@njit(cache=True, nogil=True)
def _reaching(acc, rest, theta):  # pragma: no cover - compiled
    """Rows scored so far (ascending) whose score plus `rest` is not below `theta`, with the
    rounding room of `_cannot_reach`."""
    out = np.empty(acc.size, np.int64)
    n = 0
    for r in range(acc.size):  # no branch: whether a row is kept is a coin toss
        v = acc[r]
        out[n] = r
        n += (v > 0.0) & ((v + rest) * (1.0 + 1e-4) + 1e-4 >= theta)
    return out[:n].copy()


@njit(cache=True, nogil=True)
def _lower_bound(rows, r, lo, hi):  # pragma: no cover - compiled
    """The first position in rows[lo:hi] (ascending) whose row is not below `r`."""
    while lo < hi:
        mid = (lo + hi) // 2
        if rows[mid] < r:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _add_where_held(rows, tf, wanted, n_wanted, lengths, out, weight, k1, b, avgdl, rest, theta,
                    doc_codes, best, docs, n_docs_seen):  # pragma: no cover - compiled
    """Add the term's contribution to the first `n_wanted` of the `wanted` rows (ascending)
    that hold it — a galloping search through its ascending rows, so a long list is touched
    only near the wanted rows — and keep, in place and in order, those that can still reach
    `theta` with `rest` more (the rounding room of `_cannot_reach`); their documents' best
    scores are raised as in `_accumulate_above`, with `theta` as the floor. Returns how many
    rows were kept and documents recorded."""
    lo = 0
    n = rows.size
    kept = 0
    for j in range(n_wanted):
        r = wanted[j]
        if lo < n:
            step = 1
            hi = lo
            while hi < n and rows[hi] < r:  # gallop to a bracket, then bisect inside it
                lo = hi + 1
                hi = lo + step
                step *= 2
            lo = _lower_bound(rows, r, lo, min(hi, n))
            if lo < n and rows[lo] == r:
                t = np.float32(tf[lo])
                out[r] += weight * t * (k1 + 1.0) / (t + k1 * (1.0 - b + b * lengths[r] / avgdl))
        v = out[r]
        if (v + rest) * (1.0 + 1e-4) + 1e-4 < theta:
            continue
        wanted[kept] = r
        kept += 1
        if v > theta:
            n_docs_seen = _raise_best(doc_codes[r], v, best, docs, n_docs_seen)
    return kept, n_docs_seen


@njit(cache=True, nogil=True)
def _count_sorted_hits(rows, wanted):  # pragma: no cover - compiled
    """How many of the `wanted` rows (ascending) the ascending `rows` hold."""
    i = 0
    count = 0
    n = rows.size
    for r in wanted:
        i = _lower_bound(rows, r, i, n)
        if i >= n:
            break
        if rows[i] == r:
            count += 1
    return count
