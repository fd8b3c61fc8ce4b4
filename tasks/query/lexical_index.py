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
ROW, TF = np.dtype("<i4"), np.dtype("<u2")
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
                stem: bool = True, ngrams: int = 0, progress=None) -> LexicalBuild:
    """Analyse every text once and write the index files under `folder`."""
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
    info = LexicalBuild(rows=csc.shape[0], terms=csc.shape[1], postings=int(csc.nnz),
                     size_bytes=size, chunk_digest=chunk_digest(chunk_ids),
                     build_s=round(time.perf_counter() - started, 3))
    meta = {"format": FORMAT, "analyzer": analyzer_id(stem, ngrams), "stem": stem, "char_ngrams": ngrams,
            "rows": info.rows, "terms": info.terms, "postings": info.postings,
            "chunk_digest": info.chunk_digest, "build_s": info.build_s}
    (folder / "meta.json").write_text(json.dumps(meta))
    return info


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
        return index

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
