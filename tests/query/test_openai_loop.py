"""The whole loop through the `openai` provider against a loopback chat-completions server
that plays a model: it reads only the prompt text, as a real model would."""
from __future__ import annotations

import json
import re

from schemas.query import LoopParams
from tasks.llm.openai_http import OpenAIProvider
from tasks.query.loop import answer_question
from tasks.store.layout import StoreLayout
from tests.llm.chat_server import ChatServer
from tests.query.conftest import make_retriever

MEM = {"prior_findings": "", "question_analysis": "", "evidence_gathered": "",
       "gaps_remaining": "", "next_steps": ""}


def model(prompt: str) -> dict:
    """A deterministic stand-in for a model, answering from the prompt alone."""
    if "Split the question" in prompt:
        return {"sub_questions": [{"text": "Floquet président", "target_corpus": "journal_officiel",
                                   "entities": ["Floquet"]}]}
    if "Review every passage" in prompt:
        ids = re.findall(r"^\[([^\]]+)\] doc", prompt, re.MULTILINE)
        return {"thought": "t", "action": "review", "memory_update": MEM, "args": {"verdicts": [
            {"chunk_id": c, "verdict": "accept" if "Floquet" in prompt.split(f"[{c}]")[1][:300]
             else "reject", "rationale": "names Floquet"} for c in ids]}}
    if "Choose ONE search" in prompt:
        done = "bm25: " in prompt
        return {"thought": "t", "action": "finish" if done else "bm25",
                "args": {} if done else {"query": "Floquet", "corpus": None}, "memory_update": MEM}
    if "These passages were held" in prompt:
        return {"decisions": []}
    if "Write the briefing" in prompt:
        return {"summary": "s", "confirmed_facts": [], "dates": [], "entities": [], "gaps": [],
                "search_hints": []}
    if "Revise the sub-questions" in prompt:
        return {"sub_questions": [], "reason": "done"}
    if "accepted equally often" in prompt:
        return {"order": re.findall(r"^- (\S+) \(", prompt, re.MULTILINE)}
    raise AssertionError("unexpected prompt: " + prompt[:200])


def test_the_loop_runs_on_an_openai_compatible_endpoint(lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    respond = lambda body: json.dumps(model(body["messages"][-1]["content"]), ensure_ascii=False)
    with ChatServer([], responder=respond) as srv:
        provider = OpenAIProvider(srv.url, "stand-in", None, backoff_s=0.01)
        pkg = answer_question(r, "Comment la presse juge-t-elle M. Floquet ?", provider,
                              LoopParams(review_k=3), layout=StoreLayout(tmp_path, tmp_path))
    assert pkg.provider == "openai" and pkg.model == "stand-in"
    assert pkg.cost.llm_calls == len(srv.requests) and pkg.cost.tokens_in == 11 * pkg.cost.llm_calls
    assert all(b["response_format"] == {"type": "json_object"} for b in srv.requests)
    assert "jo-2" in pkg.accepted  # accepted from the review the endpoint returned
    assert all("Floquet" in " ".join(e.text for e in d.evidence) for d in pkg.documents
               if d.status == "accepted")
