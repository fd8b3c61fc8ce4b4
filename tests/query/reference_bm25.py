"""BM25 over chunks held in memory: a sparse term-frequency matrix, scored only inside the
allowed rows. The serving channel reads the same statistics from disk (`tasks.index.postings`);
this one is its reference scorer (the tests, `bench/bench_scale.py`), and serves no production
path.

The index stores raw term frequencies (chunks × terms, CSC) and chunk lengths, not
precomputed BM25 weights, so document frequency and average length are computed over the
rows the caller may see: a forbidden chunk changes neither which chunks match nor their
scores. Built lazily per generation and analysis, cached as one object under the generation's
index folder in the warehouse (removing that folder drops it).
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from tasks.index.analyzer import analyze, analyzer_id
from tasks.store.location import Location, open_location

log = logging.getLogger(__name__)


def term_scores(tf: np.ndarray, lengths: np.ndarray, df: int, n: int, avgdl: float, q: int,
                k1: float, b: float) -> np.ndarray:
    """One query term's BM25 contribution to the rows holding it (Lucene's idf, never negative);
    `df`, `n` and `avgdl` are statistics of the rows the principal may see."""
    idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
    norm = k1 * (1.0 - b + b * lengths / avgdl)
    return q * idf * tf * (k1 + 1.0) / (tf + norm)


@dataclass(frozen=True)
class Bm25Index:
    vocab: dict[str, int]
    tf: sp.csc_matrix  # (n_chunks, n_terms) float32 term frequencies
    lengths: np.ndarray  # (n_chunks,) float32 number of terms per chunk
    chunk_digest: str  # of the chunk ids in row order: an index belongs to one row order

    @classmethod
    def build(cls, texts: list[str], chunk_ids: list[str], stem: bool = True,
              ngrams: int = 0) -> "Bm25Index":
        vocab: dict[str, int] = {}
        indptr, indices, data = [0], [], []
        lengths = np.zeros(len(texts), dtype=np.float32)
        for i, text in enumerate(texts):
            terms = analyze(text, stem=stem, ngrams=ngrams)
            lengths[i] = len(terms)
            ids, counts = np.unique([vocab.setdefault(t, len(vocab)) for t in terms],
                                    return_counts=True)
            indices.extend(ids.tolist())
            data.extend(counts.tolist())
            indptr.append(len(indices))
        csr = sp.csr_matrix((np.asarray(data, np.float32), np.asarray(indices, np.int64), indptr),
                            shape=(len(texts), len(vocab)))
        return cls(vocab=vocab, tf=csr.tocsc(), lengths=lengths,
                   chunk_digest=digest_ids(chunk_ids))

    def scores(self, query_terms: list[str], mask: np.ndarray, k1: float = 1.2,
               b: float = 0.75) -> np.ndarray:
        """BM25 of every row for the query (0 outside `mask`), with statistics of `mask` only.

        Repeated query terms count once per occurrence, as in bm25s and Lucene.
        """
        out = np.zeros(self.tf.shape[0], dtype=np.float32)
        n = int(mask.sum())
        if n == 0:
            return out
        avgdl = float(self.lengths[mask].mean()) or 1.0
        terms, qtf = np.unique([t for t in query_terms if t in self.vocab], return_counts=True)
        for term, q in zip(terms.tolist(), qtf.tolist()):
            col = self.vocab[term]
            lo, hi = self.tf.indptr[col], self.tf.indptr[col + 1]
            rows, tf = self.tf.indices[lo:hi], self.tf.data[lo:hi]
            keep = mask[rows]
            rows, tf = rows[keep], tf[keep]
            if rows.size == 0:
                continue
            out[rows] += term_scores(tf, self.lengths[rows], rows.size, n, avgdl, q, k1, b)
        return out

    # persistence -------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """One .npz object: a reader of the warehouse (local or S3) sees a whole index or none."""
        buffer = io.BytesIO()
        tf = self.tf.tocsc()
        meta = json.dumps({"vocab": self.vocab, "chunk_digest": self.chunk_digest}, ensure_ascii=False)
        np.savez(buffer, data=tf.data, indices=tf.indices, indptr=tf.indptr,
                 shape=np.array(tf.shape, np.int64), lengths=self.lengths,
                 meta=np.frombuffer(meta.encode("utf-8"), np.uint8))
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Bm25Index":
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            meta = json.loads(z["meta"].tobytes().decode("utf-8"))
            tf = sp.csc_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
            return cls(vocab=meta["vocab"], tf=tf, lengths=z["lengths"], chunk_digest=meta["chunk_digest"])


def digest_ids(chunk_ids: list[str]) -> str:
    h = hashlib.sha256()
    for c in chunk_ids:
        h.update(c.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def index_location(index_dir: Location, stem: bool, ngrams: int) -> Location:
    return index_dir / f"bm25-{analyzer_id(stem, ngrams)}.npz"


def load_or_build(index_dir: Location | Path | None, texts: list[str], chunk_ids: list[str],
                  stem: bool = True, ngrams: int = 0) -> Bm25Index:
    """The cached index for this generation and analysis, built and saved on first use.

    A cached index whose row order differs from the generation's is rebuilt, never trusted.
    """
    if isinstance(index_dir, Path):
        index_dir = open_location(index_dir)
    target = index_location(index_dir, stem, ngrams) if index_dir is not None else None
    digest = digest_ids(chunk_ids)
    if target is not None and target.exists():
        index = Bm25Index.from_bytes(target.read_bytes())
        if index.chunk_digest == digest:
            return index
        log.warning("BM25 index at %s belongs to other rows; rebuilding", target)
    index = Bm25Index.build(texts, chunk_ids, stem=stem, ngrams=ngrams)
    if target is not None:
        # Concurrent builders of one index write the same bytes; the last whole write wins.
        target.write_bytes(index.to_bytes())
        log.info("built BM25 index %s (%d chunks, %d terms)", target, *index.tf.shape)
    return index
