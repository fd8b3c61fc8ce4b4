"""tasks/eval/questions.py: the one loader of question files (evaluation, ask-batch, shadow)."""
from __future__ import annotations

import json

import pytest

from schemas.query import Question
from schemas.release import ShadowQuestion
from schemas.retrieval import EvalQuestion
from tasks.eval.questions import load_questions
from tasks.ops.shadow import _recall, load_shadow_questions


def _write(tmp_path, lines):
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(json.dumps(x) if isinstance(x, dict) else x for x in lines) + "\n",
                    encoding="utf-8")
    return path


def test_evaluation_lines_are_typed_and_a_bad_line_is_named(tmp_path):
    path = _write(tmp_path, [{"question_id": "a", "question": "q", "gold_ids": ["d1"], "answer": "x"}])
    [q] = load_questions(path)
    assert isinstance(q, EvalQuestion) and q.question_type == "untyped" and q.gold_ids == ["d1"]
    bad = _write(tmp_path, [{"question_id": "a", "question": "q", "gold_ids": ["d1"]}, "",
                            {"question_id": "b", "question": "q", "gold_ids": []}])
    with pytest.raises(ValueError, match=r"q\.jsonl:3: not a question"):
        load_questions(bad)


def test_evaluation_refuses_an_id_twice_and_stops_at_the_limit(tmp_path):
    row = {"question_id": "a", "question": "q", "gold_ids": ["d1"]}
    path = _write(tmp_path, [row, row])
    with pytest.raises(ValueError, match="duplicate question_id"):
        load_questions(path)
    assert len(load_questions(path, limit=1)) == 1


def test_batch_questions_are_named_by_line_number_and_numbered_ids_read_as_text(tmp_path):
    path = _write(tmp_path, [{"question": "first"}, "", {"question": "third", "question_id": 7},
                             {"question": "fourth", "gold_ids": ["ignored"]}, {"question": "fourth"}])
    qs = load_questions(path, None, Question, default_id=str, unique_ids=False)
    assert [(q.question, q.question_id) for q in qs] == [
        ("first", "1"), ("third", "7"), ("fourth", "4"), ("fourth", "5")]
    assert len(load_questions(path, 2, Question, default_id=str, unique_ids=False)) == 2


def test_shadow_questions_are_named_q_and_line_number_and_may_lack_gold(tmp_path):
    path = _write(tmp_path, [{"question": "a", "gold_ids": ["d1"]}, "",
                             {"question": "b", "question_id": "mine"}, {"question": "c", "question_id": ""}])
    qs = load_shadow_questions(path)
    assert all(isinstance(q, ShadowQuestion) for q in qs)
    assert [q.question_id for q in qs] == ["q1", "mine", "q4"]
    assert qs[1].gold_ids == []


def test_shadow_recall_is_the_evaluation_recall_and_none_without_gold():
    assert _recall(["a", "b", "c"], ["c", "z"], 3) == 0.5
    assert _recall(["a", "b", "c"], ["c", "z"], 2) == 0.0
    assert _recall(["a", "b"], [], 2) is None
