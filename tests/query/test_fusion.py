from __future__ import annotations

import pytest

from schemas.retrieval import DocHit
from tasks.query.fusion import rrf


def hits(*docs: str, corpus: str = "c") -> list[DocHit]:
    return [DocHit(doc_id=d, score=1.0 / (i + 1), rank=i + 1, best_chunk_id=f"{d}#0",
                   corpus=corpus, date=None) for i, d in enumerate(docs)]


def test_rrf_sums_reciprocal_ranks_with_k():
    fused = rrf({"bm25": hits("a", "b"), "dense": hits("b", "c")}, k=60)
    by = {f.doc_id: f for f in fused}
    assert by["b"].fused_score == pytest.approx(1 / 62 + 1 / 61)
    assert [f.doc_id for f in fused] == ["b", "a", "c"]
    assert by["a"].ranks == {"bm25": 1, "dense": None, "temporal": None}
    assert [f.rank for f in fused] == [1, 2, 3]


def test_weights_keep_a_weak_channel_from_overturning_a_strong_one():
    rankings = {"bm25": hits("a", "b", "c"), "dense": hits("c", "b", "a")}
    equal = {f.doc_id: f.fused_score for f in rrf(rankings, {"bm25": 1.0, "dense": 1.0})}
    assert equal["a"] == pytest.approx(equal["c"])  # mirrored lists: no channel prevails
    weighted = rrf(rankings, {"bm25": 1.0, "dense": 0.3})
    assert [f.doc_id for f in weighted] == ["a", "b", "c"]


def test_ties_break_by_best_single_rank_then_id():
    fused = rrf({"bm25": hits("x", "y"), "dense": hits("y", "x")})
    assert [f.doc_id for f in fused] == ["x", "y"]  # equal scores, equal best rank → by id


def test_a_channel_listing_a_document_twice_counts_it_once():
    fused = rrf({"bm25": hits("a", "a", "b")})
    assert fused[0].fused_score == pytest.approx(1 / 61)


def test_limit_and_best_chunk_from_the_strongest_contribution():
    fused = rrf({"bm25": hits("a", "b"), "dense": [DocHit(doc_id="b", score=1, rank=1,
                                                          best_chunk_id="b#7", corpus="c", date=None)]},
                limit=1)
    assert len(fused) == 1 and fused[0].doc_id == "b" and fused[0].best_chunk_id == "b#7"


def test_balance_interleaves_sub_corpora_by_their_own_order():
    from tasks.query.fusion import balance

    fused = rrf({"bm25": hits("a1", "a2", "a3") + [
        DocHit(doc_id="b1", score=0.1, rank=4, best_chunk_id="b1#0", corpus="small", date=None)]})
    fused = [f.model_copy(update={"corpus": "big"}) if f.doc_id.startswith("a") else f
             for f in fused]
    out = balance(fused, limit=3)
    assert [h.doc_id for h in out] == ["a1", "b1", "a2"]
    assert [h.rank for h in out] == [1, 2, 3]
