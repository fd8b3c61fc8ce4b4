"""The LLM-free `rules` policy: what it plans, accepts, briefs and how briefings steer."""
from __future__ import annotations

import json

import pytest

from schemas.query import PURPOSES, Memory
from tasks.llm import cues
from tasks.llm.base import Ledger, LlmRequest, call_validated
from tasks.llm.rules import RulesProvider

CORPORA = ["journal_officiel", "l_intransigeant", "le_gaulois"]
STEP = {"question": "q", "briefings": [], "searches": [], "accepted": [], "budget_left": 6,
        "corpora": CORPORA, "memory": Memory.empty().model_dump()}


def ask(purpose, context):
    """The policy's answer (a validated output model, dumped for the asserts below) to a
    context given as JSON, which the purpose's context model parses first."""
    typed = PURPOSES[purpose].context.model_validate(context)
    req = LlmRequest(purpose, [{"role": "user", "content": "(rendered prompt)"}], typed)
    out = call_validated(RulesProvider(), req, Ledger()).value  # schema-valid by construction
    assert isinstance(out, PURPOSES[purpose].output)
    return out.model_dump()


def plan(question, cap=4, corpora=CORPORA):
    return ask("plan", {"question": question, "corpora": corpora, "max_sub_questions": cap})


def test_entities_keep_their_surface_form_and_skip_question_words():
    q = "En 1887, comment M. Pierre Blanc et la Compagnie des Messageries Maritimes sont-ils jugés ?"
    assert cues.entities(q) == ["Pierre Blanc", "Compagnie des Messageries Maritimes"]
    assert cues.entities("Entre L'Intransigeant et Le Gaulois, lequel critique M. Ribot ?") == ["Ribot"]


def test_entity_matching_tolerates_ocr_splits_and_accents():
    text = cues.squash("il appelle M. Flo- quet au fauteuil; M. Pierre Blanc s'assied")
    assert cues.match_entity("M. Floquet", text) == 1.0
    assert cues.match_entity("Pierre Blanc", text) == 1.0
    assert cues.match_entity("Jules Floquet", text) == 0.5  # distinctive last word only
    assert cues.match_entity("Ribot", text) == 0.0


def test_dates_in_french_and_iso():
    assert cues.dates_in("la séance du 13 janvier 1887 et celle du 1887-02-01") == [
        "1887-02-01", "1887-01-13"]


def test_plan_for_both_papers_targets_each_paper_then_all():
    p = plan("Entre L'Intransigeant et Le Gaulois, lequel critique le plus la loi militaire ?")
    targets = [s["target_corpus"] for s in p["sub_questions"]]
    assert targets == ["le_gaulois", "l_intransigeant", None]
    assert all("Intransigeant" not in s["text"] for s in p["sub_questions"])


def test_plan_for_chamber_and_press_puts_the_debate_first_within_the_cap():
    q = "Quel argument M. Ribot avance-t-il à la Chambre, et comment la presse le rapporte-t-elle ?"
    targets = [s["target_corpus"] for s in plan(q)["sub_questions"]]
    assert targets == ["journal_officiel", "le_gaulois", "l_intransigeant", None]
    assert [s["target_corpus"] for s in plan(q, cap=2)["sub_questions"]] == [
        "journal_officiel", "le_gaulois"]
    assert plan(q)["sub_questions"][0]["entities"] == ["Ribot"]


def test_plan_only_targets_corpora_the_principal_can_read():
    q = "Quel argument M. Ribot avance-t-il à la Chambre, et comment la presse le rapporte-t-elle ?"
    targets = [s["target_corpus"] for s in plan(q, corpora=["le_gaulois"])["sub_questions"]]
    assert targets == ["le_gaulois", None]


SQ = {"text": "M. Floquet président", "target_corpus": "le_gaulois", "entities": ["Floquet"],
      "dates": []}
JO_BRIEF = {"summary": "", "confirmed_facts": [], "dates": ["1887-01-13"],
            "entities": ["Pierre Blanc"], "gaps": [], "search_hints": []}


def hit(cid, text, date="1887-01-20", fused=None, rank=5, tool="bm25"):
    return {"chunk_id": cid, "doc_id": cid.split("#")[0], "corpus": "le_gaulois", "date": date,
            "text": text, "tool": tool, "rank": rank, "widened": False,
            "warm": {"fused": fused, "bm25": fused, "dense": fused, "temporal": None}
            if fused else None}


def test_review_accepts_the_best_passage_only_and_names_what_matched():
    out = ask("review", STEP | {"sub_question": SQ, "briefings": [JO_BRIEF], "accepted": [], "hits": [
        hit("a#0", "M. Flo- quet monte au fauteuil", date="1887-01-14", fused=2),
        hit("b#0", "Le cours des blés à la Bourse", date="1887-03-02"),
        hit("c#0", "M. Floquet préside", date="1887-03-02", fused=1)]})
    v = {x["chunk_id"]: x for x in out["args"]["verdicts"]}
    assert [v[c]["verdict"] for c in ("a#0", "b#0", "c#0")] == ["accept", "reject", "hold"]
    assert "Floquet" in v["a#0"]["rationale"] and "1887-01-14" in v["a#0"]["rationale"]
    assert all(len(x["rationale"]) <= 120 for x in v.values())


def test_review_accepts_nothing_more_once_the_sub_question_has_its_document():
    out = ask("review", STEP | {"sub_question": SQ, "briefings": [JO_BRIEF],
                         "accepted": [{"doc_id": "x", "corpus": "le_gaulois", "date": None}],
                         "hits": [hit("a#0", "M. Floquet", date="1887-01-14", fused=1)]})
    assert out["args"]["verdicts"][0]["verdict"] == "hold"


def test_review_holds_a_lone_entity_match():
    out = ask("review", STEP | {"sub_question": SQ, "briefings": [], "accepted": [],
                         "hits": [hit("c#0", "M. Floquet parle", date="1887-05-01")]})
    assert out["args"]["verdicts"][0]["verdict"] == "hold"


def test_briefing_dates_steer_the_next_press_search():
    brief = ask("briefing", {"question": "q", "memory": STEP["memory"],
                             "sub_question": {**SQ, "target_corpus": "journal_officiel"},
                             "accepted": [{"doc_id": "jo", "corpus": "journal_officiel",
                                           "date": "1887-01-13", "rationale": "r", "tool": "warm",
                                           "rank": 1, "chunk_id": "jo#0",
                                           "text": "M. Floquet. M. Pierre Blanc. M. Pierre Blanc."}]})
    assert brief["dates"] == ["1887-01-13"] and "Pierre Blanc" in brief["entities"]
    assert "1887-01-15" in brief["search_hints"][0]
    brief["documents"] = [{"doc_id": "jo", "corpus": "journal_officiel", "date": "1887-01-13"}]
    step = ask("search", STEP | {"sub_question": SQ, "briefings": [brief]})
    assert step["action"] == "date_range"  # the press reports the sitting one or two days on
    assert (step["args"]["date_from"], step["args"]["date_to"]) == ("1887-01-14", "1887-01-15")
    assert step["args"]["corpus"] == "le_gaulois"


def test_search_runs_each_tool_once_then_finishes():
    ctx = STEP | {"sub_question": SQ, "searches": [], "budget_left": 9}
    tools = []
    for _ in range(5):
        step = ask("search", ctx)
        tools.append(step["action"])
        ctx["searches"] = [*ctx["searches"], {"tool": step["action"], "args": step["args"]}]
    assert tools == ["substring", "dense", "finish", "finish", "finish"]
    assert ask("search", ctx | {"searches": [], "budget_left": 1})["action"] == "finish"


def test_replan_retries_over_all_corpora_only_within_the_cap():
    done = [{"text": "q", "target_corpus": "le_gaulois", "entities": [], "accepted": 0}]
    base = {"question": "q", "briefings": [], "corpora": CORPORA, "done": done, "remaining": []}
    out = ask("replan", base | {"max_sub_questions": 2})
    assert [s["target_corpus"] for s in out["sub_questions"]] == [None]
    assert ask("replan", base | {"max_sub_questions": 1})["sub_questions"] == []


def test_rerank_orders_a_tie_by_warm_start_support_then_date_fit():
    tie = {"rationales": [], "sub_questions": [0], "positions": [1], "fused": 1}
    cands = [{"doc_id": "jo", "corpus": "journal_officiel", "date": "1887-01-13", "support": 0.03},
             {"doc_id": "gau", "corpus": "le_gaulois", "date": "1887-03-01", "support": 0.02},
             {"doc_id": "int", "corpus": "l_intransigeant", "date": "1887-01-15", "support": 0.02}]
    accepted = [{k: c[k] for k in ("doc_id", "corpus", "date")} for c in cands]
    order = ask("rerank", {"question": "q", "candidates": [tie | c for c in cands],
                           "accepted": accepted})["order"]
    assert order == ["jo", "int", "gau"]  # int reports the 01-13 sitting two days later


def test_date_affinity_follows_how_papers_report_sittings():
    assert cues.date_affinity("journal_officiel", "1887-01-13", "le_gaulois", "1887-01-14") == 2
    assert cues.date_affinity("le_gaulois", "1887-01-15", "journal_officiel", "1887-01-13") == 2
    assert cues.date_affinity("le_gaulois", "1887-01-12", "journal_officiel", "1887-01-13") == 0
    assert cues.date_affinity("le_gaulois", "1887-01-12", "l_intransigeant", "1887-01-13") == 2
    assert cues.date_affinity("le_gaulois", "1887-01-12", "le_gaulois", "1887-01-13") == 0


def test_rules_output_is_json_text_like_a_model():
    ctx = PURPOSES["plan"].context(question="M. Ribot à la Chambre", corpora=CORPORA,
                                   max_sub_questions=4)
    assert json.loads(RulesProvider().complete(LlmRequest("plan", [], ctx)).text)["sub_questions"]


def test_rules_refuses_a_call_without_its_typed_context():
    with pytest.raises(ValueError, match="typed context"):
        RulesProvider().complete(LlmRequest("plan", []))
