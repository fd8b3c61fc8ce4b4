"""`mabillon eval` end to end: a small published home, the evaluate flow, the report."""
from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLE_RECORDS, SHARED_DEV, settings_for, write_records


def _sample(home, inputs) -> None:
    from flows.release import release

    release(paths=[str(write_records(inputs / "export.jsonl", SAMPLE_RECORDS))], settings=settings_for(home))


@pytest.fixture
def sample_home(home_templates, home):
    """The sample records published as g0001 (a copy of one session-wide build)."""
    return home_templates.copy("sample", _sample, home)


def questions_file(tmp_path):
    ids = [r["doc_id"] for r in SAMPLE_RECORDS]
    rows = [
        {"question_id": "s1", "question_type": "MH-Generic", "gold_ids": ids[:2],
         "question": "Comment la presse rapporte-t-elle le renvoi du débat sur les blés à jeudi ?"},
        {"question_id": "s2", "question_type": "MH-Comp", "gold_ids": ids[1:3],
         "question": "Lequel des deux journaux critique le plus les ministres sur les blés de la Brie ?"},
    ]
    return write_records(tmp_path / "q.jsonl", rows)


def test_eval_command_prints_the_issue_json_and_writes_the_report(tmp_path, sample_home, capsys):
    from flows.cli.main import main

    report = tmp_path / "report"
    rc = main(["eval", str(questions_file(tmp_path)), "--home", str(sample_home),
               "--system", "bm25,hybrid", "--k", "1,3", "--report", str(report), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["system"] for s in out] == ["bm25", "hybrid"]
    for s in out:
        assert s["n"] == 2 and s["generation"] == "g0001"
        assert set(s["overall"]) >= {"recall@1", "recall@3", "mrr_first", "mrr_multi", "p_acc",
                                     "r_acc", "accepted_mean"}
        assert set(s["by_type"]) == {"MH-Generic", "MH-Comp"}
        assert s["overall"]["recall@3"] > 0  # three documents, two gold each: found
    assert {p.name for p in report.iterdir()} >= {"report.html", "summary.md", "recall_at_k.png",
                                                  "rows-bm25.parquet", "rows-hybrid.parquet"}


def test_eval_command_refuses_an_unknown_system(tmp_path, sample_home, capsys):
    from flows.cli.main import main

    rc = main(["eval", str(questions_file(tmp_path)), "--home", str(sample_home),
               "--system", "grep", "--json"])
    assert rc == 2 and json.loads(capsys.readouterr().out)["error"] == "unknown system grep"


@pytest.mark.parametrize("k", ["3,x", "0,3", ","])
def test_eval_command_refuses_cutoffs_that_are_not_positive_integers(tmp_path, k, capsys):
    from flows.cli.main import main

    code = main(["eval", str(tmp_path / "q.jsonl"), "--home", str(tmp_path), "--k", k])
    assert code == 2 and "--k takes positive integers" in capsys.readouterr().err.splitlines()[0]


def test_eval_cutoffs_are_sorted_and_distinct():
    from flows.cli.eval import cutoffs

    assert cutoffs("10, 3,3,5") == [3, 5, 10]


@pytest.mark.slow
def test_on_the_dev_questions_hybrid_beats_both_channels_and_trace_beats_hybrid(
        shared_corpus_home):
    """Issue 5's must-hold on the shared corpus: the channels and hybrid on the full development
    set; TRACE, with the offline default provider as `mabillon eval --system trace` builds it,
    against hybrid on every fifth question by question_id (118 of 590, fixed in advance, not
    picked from results): TRACE costs ~0.3 s a question on 2 shared cores, 190 s for all 590."""
    from pathlib import Path

    from flows.evaluate import EvalOptions, make_system
    from tasks.eval.questions import load_questions
    from tasks.eval.run import evaluate
    from tasks.eval.systems import Baseline
    from tasks.access.principals import resolve_principal
    from tasks.query.retriever import Retriever

    settings = settings_for(shared_corpus_home)
    retriever = Retriever.open(settings, resolve_principal(settings, None))
    questions = load_questions(Path(SHARED_DEV))
    r10 = {name: evaluate(retriever, Baseline(name=name, depth=20), questions, [3, 5, 10])[1]
           ["overall"]["recall@10"] for name in ("bm25", "dense", "hybrid")}
    assert r10["hybrid"] > r10["bm25"] and r10["hybrid"] > r10["dense"], r10

    subset = sorted(questions, key=lambda q: q.question_id)[::5]
    got = {name: evaluate(retriever, make_system(name, 20, EvalOptions(), settings), subset,
                          [3, 5, 10])[1] for name in ("hybrid", "trace")}
    assert got["trace"]["errors"] == 0 and got["trace"]["cost"]["llm_calls"] > 0, got["trace"]
    sub10 = {n: s["overall"]["recall@10"] for n, s in got.items()}
    assert sub10["trace"] > sub10["hybrid"], sub10
