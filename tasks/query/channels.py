"""The retrieval channels: each a function of (generation, allowed set, query).

BM25, dense, date range and exact substring at chunk level; BM25, dense and temporal at
document level (max-pooled to each document's best chunk). The allowed set (`AllowedSet`:
who and what fixed when it was built, when — the validity interval at the query time — at each
search) is applied *before* scoring in every channel: nothing outside it is ever scored,
returned or fetched. `Searchable` is what they read of the generation.
"""
from __future__ import annotations

import numpy as np

from schemas.retrieval import Hit, DocHit
from tasks.index.analyzer import normalize
from tasks.access.policy import AllowedSet, sql_literal
from tasks.query.searchable import Searchable
from tasks.query.substring import candidate_rows, occurrence_counts
from tasks.query.temporal import decay_scores
from tasks.query.view import best_rows, max_pool, top_rows

FETCH_BATCH = 4096  # rows whose text one read fetches (substring verification)
# chunks per wanted document in the dense channel's first search: for k = 100 documents, the
# 300 nearest chunks held 100 documents for all 590 development questions on the shared corpus
# (8 chunks a document) and for 60 of them at 1M chunks, at 100 % and 1 % (none widened)
DOC_FANOUT = 3


def filter_clause(allowed_where: str, corpus: str | None = None, date_from: str | None = None,
                  date_to: str | None = None) -> str:
    """The principal's clause narrowed by corpus and an inclusive ISO date range."""
    parts = [f"({allowed_where})"]
    if corpus is not None:
        parts.append(f"corpus = {sql_literal(corpus)}")
    if date_from is not None:
        parts.append(f"date >= {sql_literal(date_from)}")
    if date_to is not None:
        parts.append(f"date <= {sql_literal(date_to)}")
    return " AND ".join(parts)


def bm25_top(g: Searchable, allowed: AllowedSet, query: str, target: np.ndarray, k: int,
             docs: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Rows under `target` with their BM25 (statistics of the allowed set), holding the k best
    rows, or with `docs` the best rows of the k best documents; the rest score lower."""
    return g.bm25_top(query, allowed.mask, target, k, docs)


def dense_rows(g: Searchable, allowed: AllowedSet, query: str, limit: int, mask: np.ndarray,
               corpus: str | None, date_from: str | None,
               date_to: str | None) -> tuple[np.ndarray, np.ndarray]:
    """The `limit` nearest rows under `mask` (the allowed rows narrowed by the same filters)."""
    return g.dense_rows(query, limit, mask, filter_clause(allowed.where, corpus, date_from, date_to))


# chunk channels -----------------------------------------------------------------------------
def bm25_chunks(g: Searchable, allowed: AllowedSet, query: str, k: int = 50,
                corpus: str | None = None, date_from: str | None = None,
                date_to: str | None = None) -> list[Hit]:
    mask = g.view.filter_mask(allowed.mask, corpus, date_from, date_to)
    rows, scores = best_rows(*bm25_top(g, allowed, query, mask, k), k)
    return g.view.chunk_hits(rows, scores)


def dense_chunks(g: Searchable, allowed: AllowedSet, query: str, k: int = 50,
                 corpus: str | None = None, date_from: str | None = None,
                 date_to: str | None = None) -> list[Hit]:
    mask = g.view.filter_mask(allowed.mask, corpus, date_from, date_to)
    rows, sims = dense_rows(g, allowed, query, k, mask, corpus, date_from, date_to)
    return g.view.chunk_hits(rows, sims)


def date_range_chunks(g: Searchable, allowed: AllowedSet, date_from: str, date_to: str,
                      k: int = 50, corpus: str | None = None,
                      query: str | None = None) -> list[Hit]:
    """Chunks of documents dated in [date_from, date_to]: by BM25 of `query` when given
    (chunks that do not match it follow), else by date, document and position."""
    v = g.view
    target = v.filter_mask(allowed.mask, corpus, date_from, date_to)
    rows = np.flatnonzero(target)
    scores = np.zeros(rows.size, np.float32)
    if query and query.strip():  # rows outside the k best need no score: they follow by date
        scored, values = bm25_top(g, allowed, query, target, k)
        scores[np.searchsorted(rows, scored)] = values
    order = np.lexsort((v.ordinal[rows], v.doc_codes[rows], v.days[rows], -scores))[:k]
    return v.chunk_hits(rows[order], scores[order])


def substring_chunks(g: Searchable, allowed: AllowedSet, text: str, k: int = 50,
                     corpus: str | None = None) -> list[Hit]:
    """Chunks containing `text` (case, accents and spacing ignored), most occurrences first.

    Candidate rows come from the folded word tokens of the lexical index; only their texts
    are read (in batches) and counted, so no folded copy of the generation is kept."""
    needle = normalize(text)
    if not needle:
        return []
    view = g.view
    mask = view.filter_mask(allowed.mask, corpus)
    cand = candidate_rows(needle, g.lexical().rows_with_token)
    rows = np.flatnonzero(mask) if cand is None else cand[mask[cand]].astype(np.int64)
    counts = np.zeros(len(view), np.float32)
    for start in range(0, rows.size, FETCH_BATCH):
        batch = rows[start:start + FETCH_BATCH]
        texts = view.fetch(batch, ["text"]).column("text").to_pylist()
        counts[batch] = occurrence_counts(texts, needle)
    rows, scores = top_rows(counts, mask, k)
    return view.chunk_hits(rows, scores)


# document channels --------------------------------------------------------------------------
def bm25_docs(g: Searchable, allowed: AllowedSet, query: str, k: int = 50,
              corpus: str | None = None) -> list[DocHit]:
    mask = g.view.filter_mask(allowed.mask, corpus)
    rows, scores = bm25_top(g, allowed, query, mask, k, docs=True)
    return max_pool(g.view, rows, scores, k)


def dense_docs(g: Searchable, allowed: AllowedSet, query: str, k: int = 50,
               corpus: str | None = None) -> list[DocHit]:
    """The k documents of the best chunks, from at most `dense_candidates` chunks.

    The k best documents by their best chunk are the first k distinct documents among the
    best chunks: once the L nearest chunks hold k documents, the chunks beyond them cannot
    change the answer. So a search of DOC_FANOUT·k chunks comes first, and a wider one
    (four times, up to `dense_candidates`) only if it held fewer than k documents."""
    mask = g.view.filter_mask(allowed.mask, corpus)
    cap = min(int(mask.sum()), max(g.params.dense_candidates, k))
    limit = min(cap, DOC_FANOUT * k)
    while True:
        rows, sims = dense_rows(g, allowed, query, limit, mask, corpus, None, None)
        if limit >= cap or rows.size < limit or g.view.document_count(rows) >= k:
            return max_pool(g.view, rows, sims, k)
        limit = min(cap, 4 * limit)


def temporal_docs(g: Searchable, allowed: AllowedSet, date: str, k: int = 50,
                  corpus: str | None = None, half_life_days: float | None = None) -> list[DocHit]:
    """Documents by exp(-ln2·|days from `date`|/half-life); each cites its opening chunk."""
    v = g.view
    scores = decay_scores(v.days, date, half_life_days or g.params.half_life_days)
    mask = v.filter_mask(allowed.mask, corpus) & g.first
    rows, s = top_rows(scores, mask, k)
    return [v.doc_hit(int(r), float(x), n + 1) for n, (r, x) in enumerate(zip(rows, s))]
