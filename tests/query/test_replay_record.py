"""A query record replays: the recorded raw outputs reproduce the same answer; questions run
concurrently give the same answers as one by one (every call is stateless)."""
from __future__ import annotations

from schemas.query import LoopParams, Question
from tasks.llm.replay import ReplayProvider
from tasks.llm.rules import RulesProvider
from tasks.query.loop import answer_many, answer_question
from tasks.query.record import read_record
from tasks.store.layout import StoreLayout
from tests.query.conftest import make_retriever

Q = "Comment la presse juge-t-elle M. Floquet, élu président de la Chambre ?"


def test_a_record_replays_to_the_same_answer(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    layout = StoreLayout(tmp_path / "wh", tmp_path / "mf")
    first = answer_question(r, Q, RulesProvider(), LoopParams(), layout=layout)
    replay = ReplayProvider.from_record(first.record)  # no fallback: every call must be recorded
    again = answer_question(r, Q, replay, LoopParams(), layout=layout)
    assert replay.remaining() == {}
    assert [d.doc_id for d in again.documents] == [d.doc_id for d in first.documents]
    assert again.accepted == first.accepted and again.rejected == first.rejected
    a, b = read_record(first.record), read_record(again.record)
    assert [s.prompt_digest for s in a.steps] == [s.prompt_digest for s in b.steps]
    assert again.provider == "replay" and first.provider == "rules"


def test_concurrent_questions_answer_as_sequential_ones(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    qs = [Question(question=q, question_id=str(i)) for i, q in enumerate(
        [Q, "Les obsèques de M. Paul Bert", "M. Pierre Blanc, doyen d'âge", "budget de la guerre"])]
    seq = [answer_question(r, q.question, RulesProvider(), LoopParams()) for q in qs]
    par = answer_many(r, qs, RulesProvider(), LoopParams(), concurrency=4)
    assert [[d.doc_id for d in p.documents] for p in par] == [[d.doc_id for d in p.documents] for p in seq]
    assert [p.question_id for p in par] == ["0", "1", "2", "3"]
