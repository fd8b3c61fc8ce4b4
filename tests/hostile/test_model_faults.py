"""Model faults in the query loop, through the real `openai` provider against a loopback
endpoint that misbehaves: timeouts, HTTP 429/500, bodies that are not JSON, outputs that are
not JSON or fail the schema, verdicts and rankings naming chunks and documents never shown.
Every question must come back as an evidence package (never an exception), with bounded
retries, flags saying what happened, and only documents the retriever actually returned."""
from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from schemas.query import LoopParams
from tasks.llm.base import Completion, ProviderError
from tasks.llm.openai_http import OpenAIProvider
from tasks.query.loop import answer_question
from tasks.query.record import read_record
from tasks.store.layout import StoreLayout
from tests.query.conftest import DOCS, PUBLIC, make_retriever
from tests.query.test_openai_loop import MEM, model

QUESTION = "Comment la presse juge-t-elle M. Floquet ?"
VISIBLE = {d[0] for d in DOCS if d[3] == PUBLIC.tenant and set(d[4]) & set(PUBLIC.groups)}
INVENTED = "doc-that-does-not-exist"


def purpose(prompt: str) -> str:
    for words, name in (("Split the question", "plan"), ("Review every passage", "review"),
                        ("Choose ONE search", "search"), ("These passages were held", "held_review"),
                        ("Write the briefing", "briefing"), ("Revise the sub-questions", "replan"),
                        ("accepted equally often", "rerank")):
        if words in prompt:
            return name
    return "other"


class FaultServer:
    """A chat-completions endpoint whose `fault(purpose, n, body)` returns None (answer as the
    stand-in model would) or (status, raw body bytes, delay seconds, headers)."""

    def __init__(self, fault):
        self.fault = fault
        self.calls: Counter[str] = Counter()
        self.prompts: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                prompt = body["messages"][-1]["content"] if body["messages"][-1]["role"] == "user" \
                    else body["messages"][0]["content"]
                kind = purpose(body["messages"][1]["content"] if len(body["messages"]) > 1 else prompt)
                server.calls[kind] += 1
                server.prompts.append(json.dumps(body["messages"], ensure_ascii=False))
                planned = server.fault(kind, server.calls[kind], body)
                if planned is None:
                    content = json.dumps(model(body["messages"][1]["content"]), ensure_ascii=False)
                    planned = (200, completion(content), 0.0, {})
                status, raw, delay, headers = planned
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    for k, v in {"content-type": "application/json", **headers}.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def completion(content) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7}}).encode()


def first_user_prompt(body) -> str:
    return body["messages"][1]["content"]


def shown_chunks(body) -> list[str]:
    return re.findall(r"^\[([^\]]+)\] doc", first_user_prompt(body), re.MULTILINE)


def review_inventing(body):
    """A review that accepts a chunk it was never shown, beside the real ones."""
    verdicts = [{"chunk_id": c, "verdict": "reject", "rationale": "no"} for c in shown_chunks(body)]
    verdicts.append({"chunk_id": "ghost#0", "verdict": "accept", "rationale": "invented"})
    return completion(json.dumps({"thought": "t", "action": "review", "args": {"verdicts": verdicts},
                                  "memory_update": MEM}))


def always(status, raw=b"{}", delay=0.0, headers=None):
    return lambda kind, n, body: (status, raw, delay, headers or {})


SCENARIOS = {
    # name: (fault, flags that must be present, flags that must be absent)
    "timeout": (always(200, completion("{}"), delay=1.5), {"provider_error", "degraded"}, set()),
    "http-500": (always(500, b'{"error": {"message": "internal"}}'), {"provider_error", "degraded"}, set()),
    "http-429-then-ok": (lambda kind, n, body: (429, b"{}", 0.0, {"retry-after": "0.05"}) if n == 1 else None,
                         set(), {"provider_error", "degraded"}),
    "http-400": (always(400, b'{"error": {"message": "bad request"}}'), {"provider_error", "degraded"}, set()),
    "body-not-json": (always(200, b"<html><body>502 Bad Gateway</body></html>"), {"provider_error", "degraded"}, set()),
    "no-choices": (always(200, b'{"choices": []}'), {"provider_error", "degraded"}, set()),
    "content-not-text": (always(200, completion({"sub_questions": []})), {"provider_error", "degraded"}, set()),
    "output-not-json": (always(200, completion("Voici ma réponse : le document jo-2.")), {"invalid_output", "degraded"}, set()),
    "output-fails-schema": (always(200, completion(json.dumps({"answer": "jo-2", "doc_id": INVENTED}))),
                            {"invalid_output", "degraded"}, set()),
    "review-names-unshown-chunk": (lambda kind, n, body: (200, review_inventing(body), 0.0, {}) if kind == "review" else None,
                                   set(), {"provider_error"}),
    "rerank-invents-documents": (lambda kind, n, body: (200, completion(json.dumps({"order": [INVENTED, "ghost"]})), 0.0, {})
                                 if kind == "rerank" else None, set(), {"provider_error"}),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_model_fault_gives_a_degraded_honest_answer_not_an_exception(name, lance_table, toy_table, tmp_path):
    fault, must, must_not = SCENARIOS[name]
    server = FaultServer(fault)
    waits: list[float] = []  # the backoffs asked for, recorded instead of slept
    provider = OpenAIProvider(server.url, "stand-in", None, timeout_s=0.5, max_retries=2,
                              backoff_s=0.01, sleep=waits.append)
    calls: list[tuple[str, str]] = []  # the loop's calls to the provider, and how each ended
    complete = provider.complete

    def counted(request):
        try:
            answer = complete(request)
        except ProviderError:
            calls.append((request.purpose, "failed"))
            raise
        calls.append((request.purpose, "answered"))
        return answer
    provider.complete = counted
    retriever = make_retriever(lance_table, toy_table)
    try:
        package = answer_question(retriever, QUESTION, provider, LoopParams(review_k=3),
                                  layout=StoreLayout(tmp_path, tmp_path))
    finally:
        server.close()
    named = {d.doc_id for d in package.documents} | set(package.accepted) | set(package.held) \
        | set(package.rejected_docs) | set(package.retrieved)
    assert named <= VISIBLE, named - VISIBLE  # never an invented (or forbidden) document
    assert package.documents, "the warm start still answers"
    assert must <= set(package.flags), package.flags
    assert not must_not & set(package.flags), package.flags
    assert "ghost#0" not in json.dumps(package.model_dump(mode="json"))
    # bounded: each call is tried at most 1 + max_retries times, each retry waits the backoff
    # (0.01 · 2^(attempt-1)) or the server's Retry-After (0.05) once, and an endpoint that has
    # failed a call is not asked again: what was found so far is the answer
    attempts = sum(server.calls.values())
    assert attempts <= 60 and attempts <= 3 * len(calls), (server.calls, calls)
    assert len(waits) <= 2 * len(calls) and all(w <= 0.05 for w in waits), waits
    failed = [n for n, (_, how) in enumerate(calls) if how == "failed"]
    assert not failed or failed[0] == len(calls) - 1, calls
    record = read_record(package.record)
    assert record.flags == package.flags


def test_an_unshown_chunk_named_in_a_review_is_never_accepted(lance_table, toy_table, tmp_path):
    fault, _, _ = SCENARIOS["review-names-unshown-chunk"]
    server = FaultServer(fault)
    try:
        package = answer_question(make_retriever(lance_table, toy_table), QUESTION,
                                  OpenAIProvider(server.url, "m", None, backoff_s=0.01), LoopParams(review_k=3),
                                  layout=StoreLayout(tmp_path, tmp_path))
    finally:
        server.close()
    record = read_record(package.record)
    verdicts = [v for s in record.steps for v in s.verdicts]
    assert verdicts and all(v.chunk_id != "ghost#0" for v in verdicts)
    assert not package.accepted  # the review rejected every real chunk; the ghost counted for nothing
    # and the model is told, in its next prompt, that the chunk it named was not under review
    assert any("ghost#0 was not under review" in p for p in server.prompts)


class ExplodingProvider:
    """A provider whose client library fails in a way nobody planned for."""

    name, model = "exploding", "x"

    def complete(self, request) -> Completion:
        raise KeyError("a bug in a client library")


def test_an_unexpected_provider_exception_degrades_instead_of_reaching_the_user(lance_table, toy_table, tmp_path):
    package = answer_question(make_retriever(lance_table, toy_table), QUESTION, ExplodingProvider(),
                              LoopParams(review_k=3), layout=StoreLayout(tmp_path, tmp_path))
    assert {"provider_error", "degraded"} <= set(package.flags)
    assert package.documents and {d.doc_id for d in package.documents} <= VISIBLE
