"""Merge and count-grouped ranking of accepted documents; warm-start support below them."""
from __future__ import annotations

from schemas.query import SubQuestion, Verdict
from schemas.retrieval import Hit, WarmRanks
from tasks.query.agent import AgentState
from tasks.query.rerank import backfill, groups, merge


def state(index, accepted, warm):
    st = AgentState(index=index, sub_question=SubQuestion(text="q"))
    for doc in accepted:
        hit = Hit(chunk_id=f"{doc}#0", doc_id=doc, corpus="c", date=None, text="", tool="warm",
                  rank=1, score=1.0)
        st.accepted[doc] = [(hit, Verdict(chunk_id=hit.chunk_id, doc_id=doc, decision="accept",
                                          rationale=f"{doc} by {index}", sub_question=index, step=1))]
    for rank, doc in enumerate(warm, 1):
        st.warm[doc] = WarmRanks(fused=rank)
        st.warm_order.append(doc)
    return st


def test_confirmations_count_sub_questions_and_order_the_groups():
    states = [state(0, ["a", "b"], ["a", "b", "x"]), state(1, ["b"], ["b", "y"]),
              state(2, ["c"], ["c", "a"])]
    cands = merge(states)
    assert {d: c.confirmations for d, c in cands.items()} == {"a": 1, "b": 2, "c": 1}
    gs = groups(cands)
    assert [[c.doc_id for c in g] for g in gs] == [["b"], ["a", "c"]]  # a: two warm starts
    assert cands["b"].rationales == ["b by 0", "b by 1"]


def test_backfill_ranks_by_support_over_sub_questions_and_skips_taken():
    states = [state(0, [], ["x", "y", "z"]), state(1, [], ["y", "w"])]
    assert backfill(states, taken={"w"}, limit=5) == ["y", "x", "z"]
    assert backfill(states, taken=set(), limit=2) == ["y", "x"]
