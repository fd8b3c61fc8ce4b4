"""The compiled loops of BM25 over postings (numba, releasing the GIL): accumulate a term's
contribution, count allowed rows, and the pieces of the bounded top-k walk
(`PostingsIndex.top`).
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def count_allowed(rows, mask):  # pragma: no cover - compiled
    count = 0
    for r in rows:
        if mask[r]:
            count += 1
    return count


@njit(cache=True, nogil=True)
def accumulate(rows, tf, mask, lengths, out, weight, k1, b, avgdl):  # pragma: no cover - compiled
    """out[r] += weight · tf(k1+1) / (tf + k1(1 − b + b·len/avgdl)) for allowed r: `term_scores`
    without temporaries (with weight = q·idf)."""
    for i in range(rows.size):
        r = rows[i]
        if mask[r]:
            t = np.float32(tf[i])
            out[r] += weight * t * (k1 + 1.0) / (t + k1 * (1.0 - b + b * lengths[r] / avgdl))


def cannot_reach(bound, theta: float):
    """`bound` < `theta` with room for float32 rounding (a kept row costs a lookup; a dropped
    one that belonged would change the answer)."""
    return np.asarray(bound) * (1.0 + 1e-4) + 1e-4 < theta


def kth_largest(values: np.ndarray, k: int) -> float:
    """The k-th largest of `values`; 0 while there are fewer than k."""
    if values.size < k:
        return 0.0
    return float(np.partition(values, values.size - k)[values.size - k])


@njit(cache=True, nogil=True)
def accumulate_above(rows, tf, mask, lengths, out, weight, k1, b, avgdl, floor, doc_codes, best,
                      docs, n_docs_seen):  # pragma: no cover - compiled
    """`accumulate`, raising the best row score of each row's document in `best` where the
    row's new score is above `floor` (documents recorded for the first time go to `docs`)."""
    for i in range(rows.size):
        r = rows[i]
        if mask[r]:
            t = np.float32(tf[i])
            v = out[r] + weight * t * (k1 + 1.0) / (t + k1 * (1.0 - b + b * lengths[r] / avgdl))
            out[r] = v
            if v > floor:
                n_docs_seen = raise_best(doc_codes[r], v, best, docs, n_docs_seen)
    return n_docs_seen


@njit(cache=True, nogil=True, inline="always")
def raise_best(d, v, best, docs, n_docs_seen):  # pragma: no cover - compiled
    """best[d] = max(best[d], v), recording a document seen for the first time in `docs`."""
    held = best[d]
    if held == 0.0:
        docs[n_docs_seen] = d
        n_docs_seen += 1
    best[d] = max(held, v)  # no branch on the comparison: a coin toss per posting
    return n_docs_seen


@njit(cache=True, nogil=True)
def reaching(acc, rest, theta):  # pragma: no cover - compiled
    """Rows scored so far (ascending) whose score plus `rest` is not below `theta`, with the
    rounding room of `cannot_reach`."""
    out = np.empty(acc.size, np.int64)
    n = 0
    for r in range(acc.size):  # no branch: whether a row is kept is a coin toss
        v = acc[r]
        out[n] = r
        n += (v > 0.0) & ((v + rest) * (1.0 + 1e-4) + 1e-4 >= theta)
    return out[:n].copy()


@njit(cache=True, nogil=True)
def lower_bound(rows, r, lo, hi):  # pragma: no cover - compiled
    """The first position in rows[lo:hi] (ascending) whose row is not below `r`."""
    while lo < hi:
        mid = (lo + hi) // 2
        if rows[mid] < r:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def add_where_held(rows, tf, wanted, n_wanted, lengths, out, weight, k1, b, avgdl, rest, theta,
                    doc_codes, best, docs, n_docs_seen):  # pragma: no cover - compiled
    """Add the term's contribution to the first `n_wanted` of the `wanted` rows (ascending)
    that hold it — a galloping search through its ascending rows, so a long list is touched
    only near the wanted rows — and keep, in place and in order, those that can still reach
    `theta` with `rest` more (the rounding room of `cannot_reach`); their documents' best
    scores are raised as in `accumulate_above`, with `theta` as the floor. Returns how many
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
            lo = lower_bound(rows, r, lo, min(hi, n))
            if lo < n and rows[lo] == r:
                t = np.float32(tf[lo])
                out[r] += weight * t * (k1 + 1.0) / (t + k1 * (1.0 - b + b * lengths[r] / avgdl))
        v = out[r]
        if (v + rest) * (1.0 + 1e-4) + 1e-4 < theta:
            continue
        wanted[kept] = r
        kept += 1
        if v > theta:
            n_docs_seen = raise_best(doc_codes[r], v, best, docs, n_docs_seen)
    return kept, n_docs_seen


@njit(cache=True, nogil=True)
def count_sorted_hits(rows, wanted):  # pragma: no cover - compiled
    """How many of the `wanted` rows (ascending) the ascending `rows` hold."""
    i = 0
    count = 0
    n = rows.size
    for r in wanted:
        i = lower_bound(rows, r, i, n)
        if i >= n:
            break
        if rows[i] == r:
            count += 1
    return count
