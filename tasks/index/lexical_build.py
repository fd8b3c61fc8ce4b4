"""Build a generation's lexical index: analyse every text once, write the postings grouped
by term, and the per-access-class statistics that let a query skip postings
(`tasks.index.postings`). Format: `tasks.index.lexical_format`.
"""
from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from schemas.indexes import LexicalBuild, LexicalIndex
from tasks.access.policy import access_of
from tasks.index.analyzer import TOKEN, analyze_word, analyzer_id, normalize, words
from tasks.index.lexical_format import (CLASS_DF, FORMAT, PRUNING, ROW, TERM_STATS, TF,
                                        TOKEN_PREFIX, chunk_digest, lexical_folder,
                                        term_hashes)
from tasks.store.location import Location

log = logging.getLogger(__name__)


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
    (`tasks.access.policy.access_of`); without it every row is one class, which stays exact but makes the
    document frequencies of a restricted principal a count over the postings."""
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


def build_lexical(index_dir: Location, chunks: pa.Table, stem: bool, ngrams: int) -> LexicalIndex:
    """The postings of `chunks` (LEXICAL_COLUMNS; without tenant and groups the index has one
    access class, exact but slower for restricted principals)."""
    folder = lexical_folder(index_dir, stem, ngrams)
    texts = (t for batch in chunks.column("text").chunks for t in batch.to_pylist())
    row_class = (access_of(chunks)[0] if {"tenant", "groups"} <= set(chunks.column_names) else None)
    info = build_index(folder, texts, chunks.column("chunk_id"), stem=stem, ngrams=ngrams,
                       row_class=row_class)
    log.info("lexical index %s: %d rows, %d terms, %d postings in %.1f s", folder, info.rows,
             info.terms, info.postings, info.build_s)
    return LexicalIndex(analyzer=analyzer_id(stem, ngrams), stem=stem, char_ngrams=ngrams,
                        path=folder.name, **info.model_dump())


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
