"""The `openai` provider against a real chat-completions server on loopback."""
from __future__ import annotations

import json

import pytest

from schemas.query import OUTPUT_SCHEMAS, RerankOutput
from tasks.llm.base import BudgetExhausted, InvalidOutput, Ledger, LlmRequest, ProviderError, \
    call_validated
from tasks.llm.openai_http import OpenAIProvider
from tests.llm.chat_server import ChatServer, fail, ok

REQ = LlmRequest("rerank", [{"role": "user", "content": "order a, b"}])
GOOD = json.dumps({"order": ["b", "a"]})


def provider(url, **kw):
    return OpenAIProvider(url, "test-model", "sk-test", **({"backoff_s": 0.01} | kw))


def test_validated_object_tokens_and_request_shape():
    with ChatServer([ok(GOOD)]) as srv:
        ledger = Ledger()
        result = call_validated(provider(srv.url), REQ, ledger)
    assert result.value == RerankOutput(order=["b", "a"])
    assert (ledger.calls, ledger.tokens_in, ledger.tokens_out) == (1, 11, 7)
    body = srv.requests[0]
    assert body["model"] == "test-model" and body["messages"] == REQ.messages
    assert body["response_format"] == {"type": "json_object"} and "tools" not in body
    assert srv.headers[0]["Authorization"] == "Bearer sk-test"


def test_json_schema_response_format_sends_the_schema():
    with ChatServer([ok(GOOD)]) as srv:
        call_validated(provider(srv.url, response_format="json_schema"), REQ, Ledger())
    assert srv.requests[0]["response_format"]["json_schema"]["schema"] == OUTPUT_SCHEMAS["rerank"] == RerankOutput.model_json_schema()


def test_server_errors_are_retried_with_backoff():
    with ChatServer([fail(503), fail(429, headers={"Retry-After": "0"}), ok(GOOD)]) as srv:
        result = call_validated(provider(srv.url), REQ, Ledger())
    assert result.value.order == ["b", "a"] and len(srv.requests) == 3


def test_client_error_is_not_retried():
    with ChatServer([fail(400, "bad request"), ok(GOOD)]) as srv:
        with pytest.raises(ProviderError, match="HTTP 400"):
            call_validated(provider(srv.url), REQ, Ledger())
    assert len(srv.requests) == 1


def test_timeouts_exhaust_the_retries():
    with ChatServer([ok(GOOD, delay=0.5)] * 2) as srv:
        with pytest.raises(ProviderError, match="failed after 2 attempts"):
            call_validated(provider(srv.url, timeout_s=0.1, max_retries=1), REQ, Ledger())
    assert len(srv.requests) == 2


def test_invalid_output_is_re_asked_with_the_error():
    with ChatServer([ok("```json\n{\"order\": []}\n```"), ok(GOOD)]) as srv:
        result = call_validated(provider(srv.url), REQ, Ledger(), max_retries=1)
    assert result.attempts == 2 and result.value.order == ["b", "a"]
    reask = srv.requests[1]["messages"]
    assert reask[-2] == {"role": "assistant", "content": "```json\n{\"order\": []}\n```"}
    assert "invalid" in reask[-1]["content"] and "order" in reask[-1]["content"]


def test_invalid_after_all_re_asks_raises_with_the_accounting():
    with ChatServer([ok("nope"), ok("still nope")]) as srv:
        with pytest.raises(InvalidOutput) as err:
            call_validated(provider(srv.url), REQ, Ledger(), max_retries=1)
    assert err.value.result.attempts == 2 and err.value.result.tokens_in == 22


def test_per_question_budget_on_calls_and_tokens():
    with ChatServer([ok(GOOD)] * 3) as srv:
        ledger = Ledger(max_tokens=30)
        call_validated(provider(srv.url), REQ, ledger)  # 18 tokens
        call_validated(provider(srv.url), REQ, ledger)  # 36: over, but only known afterwards
        with pytest.raises(BudgetExhausted, match="token budget"):
            call_validated(provider(srv.url), REQ, ledger)
        calls = Ledger(max_calls=1)
        call_validated(provider(srv.url), REQ, calls)
        with pytest.raises(BudgetExhausted, match="call budget"):
            call_validated(provider(srv.url), REQ, calls)
    assert len(srv.requests) == 3
