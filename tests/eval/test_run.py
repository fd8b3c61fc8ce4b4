from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pyarrow.parquet as pq

from schemas.retrieval import EvalQuestion
from tasks.eval.report import build_report, write_run
from tasks.eval.run import bounded_map, evaluate
from tasks.eval.systems import SystemAnswer

QUESTIONS = [
    EvalQuestion(question_id="q1", question="a", question_type="T1", gold_ids=["g1", "g2"]),
    EvalQuestion(question_id="q2", question="b", question_type="T2", gold_ids=["g3", "g4"]),
    EvalQuestion(question_id="q3", question="boom", question_type="T2", gold_ids=["g5", "g6"]),
]


@dataclass
class FakeRetriever:
    generation: str = "g0007"


class Canned:
    """A system whose answers are fixed per question; 'boom' raises."""

    def __init__(self, name, loop=False):
        self.name, self.loop, self.accepts = name, loop, loop

    def prepare(self, retriever, questions):
        pass

    def answer(self, retriever, question):
        if question == "boom":
            raise RuntimeError("provider down")
        if question == "a":
            return SystemAnswer(ranked=["g1", "x", "y", "g2"],
                                accepted=["g1", "x"] if self.loop else None,
                                retrieved=["g1", "x", "y", "g2"], cost={"llm_calls": 3})
        return SystemAnswer(ranked=["x", "y", "z", "w"], accepted=["g3"] if self.loop else None,
                            held=["g4"], retrieved=["g3", "g4", "x"], cost={"llm_calls": 2})


def test_summary_has_the_issue_shape_and_values():
    rows, s = evaluate(FakeRetriever(), Canned("bm25"), QUESTIONS, ks=[3, 10])
    assert s["system"] == "bm25" and s["generation"] == "g0007" and s["n"] == 3
    assert s["overall"]["recall@3"] == (0.5 + 0 + 0) / 3
    assert s["overall"]["recall@10"] == (1.0 + 0 + 0) / 3
    assert s["overall"]["mrr_multi"] == ((1 + 1 / 4) / 2) / 3
    assert s["overall"]["p_acc"] is None and s["misses"] is None
    assert s["by_type"]["T2"]["n"] == 2 and s["by_type"]["T1"]["recall@10"] == 1.0
    assert s["errors"] == 1
    assert set(s["cost"]) >= {"llm_calls", "tokens_in", "tokens_out", "model_s", "framework_s"}
    assert rows.num_rows == 3 and rows.column("error").to_pylist()[2].startswith("RuntimeError")


def test_trace_adds_accepted_metrics_and_miss_attribution():
    _, s = evaluate(FakeRetriever(), Canned("trace", loop=True), QUESTIONS, ks=[3])
    assert s["overall"]["p_acc"] == (0.5 + 1.0) / 2  # the failed question accepted nothing
    assert s["overall"]["r_acc"] == (0.5 + 0.5 + 0) / 3
    # q1: g2 at rank 4 > 3, not accepted, shown → retrieved_not_reviewed;
    # q2: g3 accepted but not ranked, g4 held; q3: both never retrieved.
    assert s["misses"] == {"never_retrieved": 2, "retrieved_not_reviewed": 1, "rejected": 0,
                           "held_not_promoted": 1, "accepted_below_k": 1}
    assert s["cost"]["llm_calls"] == 5


def test_bounded_map_keeps_order_and_concurrency_bound():
    live, peak, lock = [0], [0], threading.Lock()

    def work(i):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        time.sleep(0.01 * (5 - i % 5))
        with lock:
            live[0] -= 1
        return i

    assert list(bounded_map(work, range(12), 3)) == list(range(12))
    assert peak[0] <= 3


def test_report_collects_every_system_in_the_folder(tmp_path):
    for name, loop in (("bm25", False), ("trace", True)):
        rows, s = evaluate(FakeRetriever(), Canned(name, loop), QUESTIONS, ks=[3, 10])
        paths = write_run(tmp_path, s, rows)
    md = paths["markdown"].read_text()
    assert "| bm25 |" in md and "| trace |" in md and "never_retrieved" in md
    assert paths["recall_plot"].stat().st_size > 1000 and paths["miss_plot"].exists()
    assert "rows-trace.parquet" in paths["html"].read_text()
    assert pq.read_table(tmp_path / "rows-bm25.parquet").num_rows == 3
    assert build_report(tmp_path)["markdown"].read_text() == md  # rebuilt the same
