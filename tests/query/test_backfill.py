from schemas.retrieval import WarmRanks
from schemas.query import SubQuestion
from tasks.query.agent import AgentState
from tasks.query.rerank import backfill


def _state(index: int, ranking: list[str]) -> AgentState:
    st = AgentState(index=index, sub_question=SubQuestion(text="q", target_corpus=None))
    for rank, doc in enumerate(ranking, start=1):
        st.warm[doc] = WarmRanks(fused=rank)
    return st


def test_backfill_joins_the_whole_questions_ranking_to_the_sub_questions():
    states = [_state(0, ["a", "b", "c"]), _state(1, ["b", "d"])]
    assert backfill(states, set(), 10) == ["b", "a", "d", "c"]
    # a document only the whole question's warm start found still reaches the package
    with_question = backfill(states, {"b"}, 10, ["e", "a"], question_weight=1.0)
    assert with_question[0] == "a" and "e" in with_question and "b" not in with_question
