"""Reciprocal-rank fusion of per-channel document rankings.

RRF only looks at ranks, so channels with incomparable scores (BM25, cosine, date decay) fuse
without calibration; per-channel weights let a weaker channel add recall without pulling the
stronger one's documents down (equal weights lost to BM25 alone on this corpus, issue 5).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from schemas.retrieval import CHANNELS, DocHit, FusedHit


def rrf(rankings: Mapping[str, Sequence[DocHit]], weights: Mapping[str, float] | None = None,
        k: int = 60, limit: int | None = None) -> list[FusedHit]:
    """Fuse channel rankings: score(d) = Σ_c w_c / (k + rank_c(d)).

    A document's best chunk and metadata come from the channel that contributed most to its
    score. Ties break by best single-channel rank, then doc id, so fusion is deterministic.
    """
    weights = weights or {}
    fused: dict[str, float] = {}
    ranks: dict[str, dict[str, int | None]] = {}
    best: dict[str, tuple[float, DocHit]] = {}
    for channel, hits in rankings.items():
        w = float(weights.get(channel, 1.0))
        seen: set[str] = set()
        for hit in hits:
            if hit.doc_id in seen:  # a channel lists a document once; keep its first rank
                continue
            seen.add(hit.doc_id)
            contrib = w / (k + hit.rank)
            fused[hit.doc_id] = fused.get(hit.doc_id, 0.0) + contrib
            ranks.setdefault(hit.doc_id, {c: None for c in (*CHANNELS, *rankings)})[channel] = hit.rank
            if hit.doc_id not in best or contrib > best[hit.doc_id][0]:
                best[hit.doc_id] = (contrib, hit)

    def min_rank(doc: str) -> int:
        return min((r for r in ranks[doc].values() if r is not None), default=10**9)

    order = sorted(fused, key=lambda d: (-fused[d], min_rank(d), d))
    if limit is not None:
        order = order[:limit]
    out = []
    for n, doc in enumerate(order, start=1):
        hit = best[doc][1]
        out.append(FusedHit(doc_id=doc, fused_score=fused[doc], rank=n, ranks=ranks[doc],
                            best_chunk_id=hit.best_chunk_id, corpus=hit.corpus, date=hit.date))
    return out


def balance(fused: Sequence[FusedHit], limit: int | None = None) -> list[FusedHit]:
    """Interleave sub-corpora: the best document of each corpus, then the second of each, …
    (within a round, by fused score). Questions about an archive usually cross sub-corpora
    (a debate and its press report, two papers on one sitting), and a large or verbose
    sub-corpus otherwise fills the top of the list on its own."""
    by_corpus: dict[str, list[FusedHit]] = {}
    for hit in fused:
        by_corpus.setdefault(hit.corpus, []).append(hit)
    out: list[FusedHit] = []
    depth = max((len(v) for v in by_corpus.values()), default=0)
    for level in range(depth):
        round_ = [v[level] for v in by_corpus.values() if level < len(v)]
        out.extend(sorted(round_, key=lambda h: h.rank))
    out = out[:limit] if limit is not None else out
    return [h.model_copy(update={"rank": n}) for n, h in enumerate(out, start=1)]


def ocr_prior(fused: Sequence[FusedHit], quality: Callable[[FusedHit], float | None],
              weight: float, k: int = 60) -> list[FusedHit]:
    """Lower each document's fused score by `weight`·(1 − its OCR quality)/(k + 1) and reorder.

    The unit is a first-rank vote of one channel (1/(k + 1)): at weight 1 a document of
    quality 0.8 loses a fifth of one. Unknown quality (None) costs nothing, so documents
    without a recorded or estimated value are neither favoured nor pushed down. Weight 0 leaves
    the list as it was. Ties keep their fused order."""
    if weight == 0 or not fused:
        return list(fused)
    scored = []
    for n, hit in enumerate(fused):
        q = quality(hit)
        penalty = weight * (1.0 - min(max(q, 0.0), 1.0)) / (k + 1) if q is not None else 0.0
        scored.append((hit.fused_score - penalty, n, hit))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [h.model_copy(update={"fused_score": s, "rank": r})
            for r, (s, _, h) in enumerate(scored, start=1)]
