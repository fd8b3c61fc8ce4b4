"""The agent's typed contracts: one model per purpose, the JSON Schema derived from it and
agreeing with it, validated outputs returned as models, and faulty outputs that degrade
honestly (flagged, never an invented document)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from schemas.query import OUTPUT_SCHEMAS, PURPOSES, LoopParams, Memory, ReviewStep, output_schemas
from schemas.retrieval import Principal
from tasks.llm.base import Ledger, LlmRequest, call_validated, validate_output
from tests.query.conftest import make_retriever
from tests.query.loop_helpers import FINISH, MEM, everything, plan, run, search

ROOT = Path(__file__).resolve().parents[2]


SAMPLES = {
    "search": [
        {"thought": "t", "action": "bm25", "args": {"query": "Floquet"}, "memory_update": MEM},
        {"thought": "t", "action": "grep", "args": {}, "memory_update": MEM},
        {"thought": "t", "action": "date_range", "args": {"date_from": "13 janvier"},
         "memory_update": MEM},
        {"thought": "t", "action": "finish", "args": {}, "memory_update": {"next_steps": ""}},
        {"thought": 1, "action": "finish", "args": {}, "memory_update": MEM},
    ],
    "review": [
        {"thought": "t", "action": "review", "memory_update": MEM,
         "args": {"verdicts": [{"chunk_id": "c", "verdict": "accept", "rationale": "r"}]}},
        {"thought": "t", "action": "review", "memory_update": MEM,
         "args": {"verdicts": [{"chunk_id": "c", "verdict": "maybe", "rationale": "r"}]}},
        {"thought": "t", "action": "review", "memory_update": MEM,
         "args": {"verdicts": [{"chunk_id": "c", "verdict": "accept", "rationale": "x" * 121}]}},
        {"thought": "t", "action": "review", "memory_update": MEM,
         "args": {"verdicts": [{"chunk_id": "c", "verdict": "hold", "rationale": "",
                                "confidence": 1.5}]}},
    ],
    "plan": [{"sub_questions": []},
             {"sub_questions": [{"text": "q", "target_corpus": None, "entities": []}]},
             {"sub_questions": [{"text": "", "target_corpus": None, "entities": []}]}],
    "rerank": [{"order": []}, {"order": ["a"]}, {"order": "a"}],
    "briefing": [{"summary": "", "confirmed_facts": [], "dates": ["1887-01-13"], "entities": [],
                  "gaps": [], "search_hints": []},
                 {"summary": "", "confirmed_facts": [], "dates": ["hier"], "entities": [],
                  "gaps": [], "search_hints": []}],
    "held_review": [{"decisions": []},
                    {"decisions": [{"chunk_id": "c", "decision": "promote", "rationale": "r"}]},
                    {"decisions": [{"chunk_id": "c", "decision": "accept", "rationale": "r"}]},
                    {"decisions": [{"chunk_id": "c", "decision": "keep", "rationale": "r",
                                    "confidence": -0.1}]}],
    "replan": [{"sub_questions": [], "reason": "done"},
               {"sub_questions": [{"text": "q", "target_corpus": None, "entities": []}],
                "reason": "r"},
               {"sub_questions": []}],
}


def accepts(output, sample) -> bool:
    return validate_output(json.dumps(sample), output)[1] is None


@pytest.mark.parametrize("purpose", sorted(PURPOSES))
def test_the_schema_sent_and_the_validator_agree(purpose):
    schema, output = OUTPUT_SCHEMAS[purpose], PURPOSES[purpose].output
    verdicts = set()
    for sample in SAMPLES[purpose]:
        by_schema = jsonschema.Draft202012Validator(schema).is_valid(sample)
        value, error = validate_output(json.dumps(sample), output)
        assert by_schema == (error is None), (sample, error)
        assert value is None or isinstance(value, output)
        verdicts.add(by_schema)
    assert verdicts == {True, False}, "samples the model both accepts and refuses"


@pytest.mark.parametrize("name", sorted(PURPOSES))
def test_a_field_added_to_an_output_model_is_in_the_schema_the_model_is_sent(name):
    """A schema written beside its model does not follow the model; a derived one does, in
    the prompt (OUTPUT_SCHEMAS) and in the provider's response_format alike."""
    from pydantic import create_model

    from tasks.llm.openai_http import OpenAIProvider

    assert set(OUTPUT_SCHEMAS) == set(PURPOSES) == {
        "plan", "search", "review", "held_review", "briefing", "replan", "rerank"}
    assert OUTPUT_SCHEMAS == output_schemas(PURPOSES)  # the module's schemas are that derivation
    base = PURPOSES[name]
    grown = create_model(f"Grown{base.output.__name__}", __base__=base.output,
                         provenance=(str, ...))
    in_prompt = output_schemas({**PURPOSES, name: base.model_copy(update={"output": grown})})[name]
    sent = OpenAIProvider("http://model.invalid", "m", response_format="json_schema").body(
        LlmRequest(name, [], output=grown))["response_format"]["json_schema"]["schema"]
    assert sent == in_prompt
    assert "provenance" in sent["properties"] and "provenance" in sent["required"]
    assert "provenance" not in OUTPUT_SCHEMAS[name]["properties"]
    # a reply the old model took is refused by the grown schema and model alike, until it has it
    old = next(s for s in SAMPLES[name] if accepts(base.output, s))
    grown_schema, with_it = jsonschema.Draft202012Validator(sent), {**old, "provenance": "p"}
    assert not grown_schema.is_valid(old) and not accepts(grown, old)
    assert grown_schema.is_valid(with_it) and accepts(grown, with_it)


def test_validated_output_is_the_model_not_a_dict():
    class Fixed:
        name, model = "fixed", None

        def complete(self, request):
            from tasks.llm.base import Completion
            return Completion(json.dumps(SAMPLES["review"][0]))
    out = call_validated(Fixed(), LlmRequest("review", []), Ledger()).value
    assert isinstance(out, ReviewStep) and out.args.verdicts[0].verdict == "accept"


def test_a_call_result_is_typed_by_the_output_model_valid_or_not():
    from tasks.llm.base import Completion, InvalidOutput, LlmResult

    class Scripted:
        name, model = "scripted", None

        def __init__(self, *texts):
            self.texts = list(texts)

        def complete(self, request):
            return Completion(self.texts.pop(0))
    result = call_validated(Scripted(json.dumps(SAMPLES["review"][0])), LlmRequest("review", []), Ledger())
    assert isinstance(result, LlmResult[ReviewStep]) and isinstance(result.value, ReviewStep)
    with pytest.raises(InvalidOutput) as exc:
        call_validated(Scripted("{}"), LlmRequest("review", []), Ledger(), max_retries=0)
    failed = exc.value.result
    assert isinstance(failed, LlmResult[ReviewStep]) and failed.value is None
    assert failed.raws == ["{}"] and failed.error.startswith("at ")
    with pytest.raises(ValueError):  # a value of another model does not fit the typed result
        LlmResult[ReviewStep](value=Memory.empty(), raw="", prompt_digest="d", attempts=1)


def test_a_review_naming_a_chunk_never_shown_changes_nothing_and_is_flagged(
        lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    invented = {"thought": "t", "action": "review", "memory_update": MEM, "args": {"verdicts": [
        {"chunk_id": "forged-doc#0", "verdict": "accept", "rationale": "made up"}]}}
    script = {"plan": [plan(("Floquet", None, ["Floquet"]))], "review": [invented],
              "search": [FINISH], "held_review": [{"decisions": []}],
              "rerank": [{"order": ["forged-doc", "jo-2"]}]}
    pkg, rec, _ = run(r, tmp_path, script, LoopParams(replan=False, review_k=2))
    assert "unknown_chunk_in_output" in pkg.flags
    ids = {d.doc_id for d in pkg.documents} | set(pkg.accepted) | set(pkg.held)
    assert "forged-doc" not in ids
    assert all(not d.doc_id.startswith("forged") for d in pkg.documents)


def test_an_output_failing_its_schema_is_retried_then_skipped_with_a_flag(
        lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    script = {"plan": [plan(("Floquet", None, ["Floquet"]))],
              "review": ['{"thought": "t", "action": "review"}'] * 3 + [everything("hold")],
              "search": [FINISH]}
    pkg, rec, _ = run(r, tmp_path, script, LoopParams(replan=False, review_k=1, max_retries=2))
    skipped = [s for s in rec.steps if s.kind == "skipped"]
    assert skipped and skipped[0].attempts == 3 and "invalid_output" in pkg.flags
    assert not pkg.accepted or all(d in {x.doc_id for x in pkg.documents} for d in pkg.accepted)


def test_the_query_record_holds_the_principal_and_loop_params_as_contracts(
        lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    _, rec, _ = run(r, tmp_path, {"plan": [plan(("Floquet", None, ["Floquet"]))]},
                    LoopParams(replan=False, step_budget=3))
    assert isinstance(rec.principal, Principal) and rec.principal.principal_id == "reader"
    assert isinstance(rec.params, LoopParams) and rec.params.step_budget == 3


# what the development questions name must not become code: no doc ids, no dated lists
_DOC_ID = re.compile(r"\b(?:1887-\d\d-\d\d_\d{3}|(?:le_gaulois|l_intransigeant)-1887\d{4})\b")
_ISO_DATE = re.compile(r"\b18\d\d-\d\d-\d\d\b")


def test_no_document_ids_or_dates_from_the_questions_in_the_judge_code():
    files = [*ROOT.glob("tasks/llm/*.py"), *ROOT.glob("tasks/query/*.py"),
             *ROOT.glob("tasks/eval/*.py"), ROOT / "schemas/query.py"]
    for f in files:
        text = f.read_text("utf-8")
        assert not _DOC_ID.search(text), f
        assert not _ISO_DATE.search(text), f
