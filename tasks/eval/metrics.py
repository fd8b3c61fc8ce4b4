"""Retrieval metrics over ranked document lists (ARCHITECTURE §5, issue 5).

Conventions, fixed here and tested on hand-made cases:
- a ranked list is deduplicated first (a document counts once, at its first position), so a
  system cannot fill its top k with one document;
- with scores given, consecutive documents with equal scores share the *worst* rank of
  their run, so a system gains nothing from the order it happened to break a tie in; the
  list order otherwise stands (scores need not be monotone);
- recall@k = |{gold with rank ≤ k}| / |gold|; mrr_first = 1 / rank of the first gold document;
  mrr_multi = mean over gold documents of 1 / rank (0 when absent);
- p_acc / r_acc = precision / recall of the accepted set (p_acc is None for an empty set and
  is averaged over questions that accepted something).
"""
from __future__ import annotations

from collections.abc import Sequence

MISS_KINDS = ("never_retrieved", "retrieved_not_reviewed", "rejected", "held_not_promoted",
              "accepted_below_k")


def dedupe(ranked: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    return [d for d in ranked if not (d in seen or seen.add(d))]


def rank_of(ranked: Sequence[str], scores: Sequence[float] | None = None) -> dict[str, int]:
    """1-based rank of each document, by position in the (deduplicated) list; with scores,
    a run of consecutive equal scores shares the last position of the run. The list order is
    the system's ranking even where scores are not monotone (e.g. after corpus balancing)."""
    if scores is not None and len(scores) != len(ranked):
        raise ValueError("ranked and scores differ in length")
    seen: set[str] = set()
    docs: list[str] = []
    kept: list[float] = []
    for i, d in enumerate(ranked):
        if d not in seen:
            seen.add(d)
            docs.append(d)
            kept.append(float(scores[i]) if scores is not None else float(-i))
    ranks: dict[str, int] = {}
    start = 0
    while start < len(docs):
        end = start
        while end + 1 < len(docs) and kept[end + 1] == kept[start]:
            end += 1
        for j in range(start, end + 1):
            ranks[docs[j]] = end + 1  # pessimistic: ties count as ahead
        start = end + 1
    return ranks


def _gold(gold: Sequence[str]) -> set[str]:
    g = set(gold)
    if not g:
        raise ValueError("a question needs at least one gold document")
    return g


def recall_at_k(ranks: dict[str, int], gold: Sequence[str], k: int) -> float:
    g = _gold(gold)
    return sum(1 for d in g if ranks.get(d, 10**9) <= k) / len(g)


def mrr_first(ranks: dict[str, int], gold: Sequence[str]) -> float:
    found = [ranks[d] for d in _gold(gold) if d in ranks]
    return 1.0 / min(found) if found else 0.0


def mrr_multi(ranks: dict[str, int], gold: Sequence[str]) -> float:
    g = _gold(gold)
    return sum(1.0 / ranks[d] for d in g if d in ranks) / len(g)


def accepted_pr(accepted: Sequence[str], gold: Sequence[str]) -> tuple[float | None, float]:
    """(precision, recall) of the accepted set; precision is None when nothing was accepted."""
    g, a = _gold(gold), set(accepted)
    hit = len(a & g)
    return (hit / len(a) if a else None), hit / len(g)


def question_metrics(ranked: Sequence[str], gold: Sequence[str], ks: Sequence[int],
                     scores: Sequence[float] | None = None) -> dict[str, float]:
    ranks = rank_of(ranked, scores)
    out = {f"recall@{k}": recall_at_k(ranks, gold, k) for k in ks}
    out["mrr_first"] = mrr_first(ranks, gold)
    out["mrr_multi"] = mrr_multi(ranks, gold)
    return out


def attribute_miss(doc_id: str, accepted: set[str], held: set[str], rejected: set[str],
                   retrieved: set[str]) -> str:
    """Where a gold document outside the top k was lost, following the loop's record: the
    furthest stage it reached wins (accepted > held > rejected > shown > never seen)."""
    if doc_id in accepted:
        return "accepted_below_k"
    if doc_id in held:
        return "held_not_promoted"
    if doc_id in rejected:
        return "rejected"
    if doc_id in retrieved:
        return "retrieved_not_reviewed"
    return "never_retrieved"


def mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None
