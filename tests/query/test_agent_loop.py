"""Control flow of the TRACE loop, one rule per test, with the replay provider over a real
(tiny) generation: the retriever of tests/query/conftest.py."""
from __future__ import annotations

from schemas.query import LoopParams
from tasks.llm.base import Ledger
from tests.query.conftest import make_retriever
from tests.query.loop_helpers import FINISH, everything, plan, review, run, search, steps


def params(**kw):
    return LoopParams(**({"replan": False} | kw))


def test_step_budget_counts_only_effective_steps(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    script = {"plan": [plan(("Floquet", None, ["Floquet"]))],
              "review": [everything("hold"), everything("hold"), everything("hold")],
              "search": [search("bm25", query="Floquet"), search("dense", query="séance"),
                         search("bm25", query="budget")]}
    pkg, rec, provider = run(r, tmp_path, script, params(step_budget=3, review_k=1))
    effective = [s for s in steps(rec) if s.effective]
    assert len(effective) == 3  # warm review, one search, its review
    assert [s.kind for s in effective] == ["review", "search", "review"]
    assert "stopped: budget" in steps(rec)[-1].feedback
    assert provider.remaining()["search"] == 2  # no search was started without room to review it


def test_duplicate_search_is_skipped_with_feedback_and_not_counted(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    script = {"plan": [plan(("Floquet", None, ["Floquet"]))],
              "review": [everything("hold")] * 3,
              "search": [search("bm25", query="Floquet"), search("dense", query="obsèques"),
                         search("bm25", query="  floquet "), FINISH]}
    pkg, rec, _ = run(r, tmp_path, script, params(review_k=1, step_budget=10))
    skipped = steps(rec, kind="skipped")
    assert len(skipped) == 1 and not skipped[0].effective
    assert "duplicate" in skipped[0].feedback
    assert steps(rec)[-2].kind == "finish"


def test_two_identical_consecutive_searches_end_the_loop(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    script = {"plan": [plan(("Floquet", None, ["Floquet"]))],
              "review": [everything("hold")] * 2,
              "search": [search("bm25", query="Floquet"), search("bm25", query="Floquet"),
                         search("dense", query="never asked")]}
    pkg, rec, provider = run(r, tmp_path, script, params(review_k=1))
    assert any(s.kind == "terminated" and s.feedback == "same search as the previous one"
               for s in steps(rec))
    assert "repeated_search" in pkg.flags
    assert provider.remaining()["search"] == 1


def test_empty_results_and_parse_failures_are_skipped_not_counted(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    script = {"plan": [plan(("Floquet", None, ["Floquet"]))],
              "review": [everything("hold")],
              "search": [search("substring", text="zzzqqqxxx"), "not json at all",
                         '{"thought": 1}', FINISH]}
    pkg, rec, _ = run(r, tmp_path, script, params(review_k=1, max_retries=1))
    skipped = steps(rec, kind="skipped")
    assert len(skipped) == 2 and not any(s.effective for s in skipped)
    assert "no new results" in skipped[0].feedback
    assert "not valid" in skipped[1].feedback and skipped[1].attempts == 2
    assert skipped[1].raw_attempts == ["not json at all", '{"thought": 1}']


def test_invalid_output_is_re_asked_with_the_validation_error(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    seen = []

    def second_try(request):
        seen.append(request.messages[-1]["content"])
        return search("bm25", query="Floquet")
    script = {"plan": [plan(("Floquet", None, ["Floquet"]))],
              "review": [everything("hold")] * 2,
              "search": [search("bm25"), second_try, FINISH]}  # args.query missing → ToolError
    script["search"][0]["action"] = "grep"  # not an allowed action: schema error
    pkg, rec, _ = run(r, tmp_path, script, params(review_k=1))
    assert seen and "invalid" in seen[0] and "action" in seen[0]
    first_search = steps(rec, kind="search")[0]
    assert first_search.attempts == 2 and first_search.effective


def test_raw_step_ceiling_forces_termination(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    script = {"plan": [plan(("Floquet", None, ["Floquet"]))],
              "review": [everything("hold")], "search": ["garbage"] * 20}
    pkg, rec, _ = run(r, tmp_path, script, params(review_k=1, max_retries=0, max_raw_steps=5))
    assert "step_ceiling" in pkg.flags
    assert len([s for s in steps(rec) if s.kind != "terminated"]) == 5


def test_date_widening_hits_are_held_silently_never_shown(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    script = {"plan": [plan(("Pierre Blanc doyen", None, ["Pierre Blanc"]))],
              "review": [review(lambda h: "reject"), everything("accept")],
              "search": [search("date_range", date_from="1887-01-13", date_to="1887-01-13"),
                         FINISH],
              "held_review": [{"decisions": []}]}
    pkg, rec, _ = run(r, tmp_path, script, params(review_k=1))
    date_step = steps(rec, kind="search")[0]
    assert date_step.channel.held_silently == ["gau-1#0"]  # dated 01-14, one day outside
    assert "gau-1#0" not in date_step.channel.shown
    shown_docs = {h["doc_id"] for h in date_step.channel.hits if h["chunk_id"] in date_step.channel.shown}
    assert shown_docs <= {"jo-2", "int-1"}
    assert "gau-1" in pkg.held and "gau-1" not in pkg.accepted
    widening = [v for s in steps(rec) for v in s.verdicts if v.by == "widening"]
    assert [v.chunk_id for v in widening] == ["gau-1#0"]


def test_reject_excludes_the_chunk_not_the_document(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    rejected = []

    def reject_first(request):
        hits = request.context.hits
        rejected.append(hits[0].chunk_id)
        return review(lambda h: "reject")(request)
    script = {"plan": [plan(("obsèques Paul Bert Floquet", "journal_officiel", ["Paul Bert"]))],
              "review": [reject_first, everything("accept")],
              "search": [search("bm25", query="Floquet obsèques Paul Bert", corpus="journal_officiel"),
                         FINISH]}
    pkg, rec, _ = run(r, tmp_path, script, params(review_k=1))
    assert rejected[0].startswith("jo-2#")
    second = steps(rec, kind="search")[0].channel
    assert rejected[0] not in second.shown
    assert any(c.startswith("jo-2#") for c in second.shown)  # the other chunk of the document
    assert "jo-2" in pkg.accepted and rejected[0] in pkg.rejected


def test_held_passage_is_promoted_by_held_review(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)

    def promote_all(request):
        return {"decisions": [{"chunk_id": h.chunk_id, "decision": "promote",
                               "rationale": "names Floquet"} for h in request.context.held]}
    script = {"plan": [plan(("Floquet", None, ["Floquet"]))],
              "review": [everything("hold")], "search": [FINISH], "held_review": [promote_all]}
    pkg, rec, _ = run(r, tmp_path, script, params(review_k=2))
    held_calls = [c for c in rec.calls if c.purpose == "held_review"]
    assert len(held_calls) == 1
    promoted = [d for d in pkg.documents if d.status == "accepted"]
    assert len(promoted) == 2 and all("names Floquet" in d.rationales for d in promoted)
    assert pkg.held == []


def test_replanner_cannot_exceed_the_sub_question_cap(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    extra = [{"text": f"sub {i}", "target_corpus": None, "entities": []} for i in range(5)]
    script = {"plan": [plan(("Floquet", None, ["Floquet"]))],
              "review": [everything("hold")] * 4, "search": [FINISH] * 4,
              "replan": [{"sub_questions": extra, "reason": "more"}] * 3}
    pkg, rec, provider = run(r, tmp_path, script,
                             LoopParams(max_sub_questions=2, review_k=1, replan=True))
    assert len(rec.sub_questions) == 2 and len(pkg.plan) == 2
    assert rec.sub_questions[1].origin == "replanner"
    assert "replan_capped" in pkg.flags
    assert len([c for c in rec.calls if c.purpose == "replan"]) == 1  # none once the cap is met


def _two_subs(second_review):
    return {"plan": [plan(("Floquet", "journal_officiel", ["Floquet"]),
                          ("Floquet", None, ["Floquet"]))],
            "review": [everything("accept"), second_review],
            "search": [FINISH, FINISH]}


def test_rerank_is_called_only_for_ties(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    # sub-question 0 accepts both JO documents, sub-question 1 one of them: groups {2: [a]},
    # {1: [b]} are singletons → no rerank call.
    script = _two_subs(review(lambda h: "accept" if h.doc_id == "jo-2" else "reject"))
    pkg, rec, _ = run(r, tmp_path / "a", script, params(review_k=2))
    assert [c for c in rec.calls if c.purpose == "rerank"] == []
    assert pkg.accepted[0] == "jo-2" and pkg.documents[0].confirmations == 2

    # now sub-question 1 accepts nothing: both JO documents tie at one confirmation
    script = _two_subs(everything("reject"))
    script["rerank"] = [lambda req: {"order": [c.doc_id for c in req.context.candidates][::-1]}]
    pkg2, rec2, _ = run(r, tmp_path / "b", script, params(review_k=2))
    reranks = [c for c in rec2.calls if c.purpose == "rerank"]
    assert len(reranks) == 1
    tied = reranks[0].output["order"]
    assert pkg2.accepted == tied and sorted(tied) == ["jo-1", "jo-2"]


def test_call_budget_stops_the_question_and_keeps_warm_start_results(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    script = {"plan": [plan(("Floquet", None, ["Floquet"]))],
              "review": [everything("hold")] * 5, "search": [search("bm25", query="Floquet")] * 5}
    pkg, rec, _ = run(r, tmp_path, script, params(review_k=1), ledger=Ledger(max_calls=2))
    assert "llm_budget_exhausted" in pkg.flags and "degraded" in pkg.flags
    assert pkg.cost.llm_calls == 2
    assert pkg.documents  # the warm start's order still answers
