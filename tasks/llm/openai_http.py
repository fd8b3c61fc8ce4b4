"""`openai`: any OpenAI-compatible chat-completions endpoint (DeepSeek, vLLM, Ollama,
llama.cpp server) over plain HTTP. JSON mode, no tool-calling API: each call is stateless."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

import httpx

from tasks.llm.base import Completion, LlmRequest, ProviderError

log = logging.getLogger(__name__)

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAIProvider:
    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 timeout_s: float = 60.0, max_retries: int = 3, backoff_s: float = 1.0,
                 response_format: str = "json_object", temperature: float = 0.0,
                 max_output_tokens: int = 1024, client: httpx.Client | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.model = model
        self.sleep = sleep  # the backoff's wait; injectable so what it asks for can be counted
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.response_format = response_format
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = client or httpx.Client(timeout=httpx.Timeout(timeout_s), headers=headers)

    def body(self, request: LlmRequest) -> dict:
        body = {"model": self.model, "messages": request.messages,
                "temperature": self.temperature, "max_tokens": self.max_output_tokens}
        if self.response_format == "json_object":
            body["response_format"] = {"type": "json_object"}
        elif self.response_format == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.purpose, "schema": request.schema, "strict": False}}
        return body

    def complete(self, request: LlmRequest) -> Completion:
        body = self.body(request)
        last, retry_after = "", None
        for attempt in range(self.max_retries + 1):
            if attempt:
                self.sleep(self._delay(attempt, retry_after))
                retry_after = None
            try:
                response = self.client.post(self.url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}"
                log.warning("%s attempt %d: %s", self.url, attempt + 1, last)
                continue
            if response.status_code in _RETRY_STATUS:
                last = f"HTTP {response.status_code}: {response.text[:200]}"
                retry_after = response.headers.get("retry-after")
                log.warning("%s attempt %d: %s", self.url, attempt + 1, last)
                continue
            if response.status_code >= 400:
                raise ProviderError(f"{self.url} answered HTTP {response.status_code}: "
                                    f"{response.text[:300]}")
            try:
                payload = response.json()
            except ValueError:  # a proxy's HTML error page with status 200: a failed attempt
                last = f"HTTP {response.status_code} with a body that is not JSON: {response.text[:200]!r}"
                log.warning("%s attempt %d: %s", self.url, attempt + 1, last)
                continue
            return self._parse(payload)
        raise ProviderError(f"{self.url} failed after {self.max_retries + 1} attempts; last: {last}")

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        """Exponential backoff; a numeric Retry-After from the server wins (capped)."""
        if retry_after:
            try:
                return min(float(retry_after), 30.0)
            except ValueError:
                pass
        return self.backoff_s * (2 ** (attempt - 1))

    @staticmethod
    def _parse(payload: dict) -> Completion:
        try:
            text = payload["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise ProviderError(f"not a chat-completions answer: {str(payload)[:300]}") from exc
        if not isinstance(text, str):
            raise ProviderError(f"chat-completions content is {type(text).__name__}, not text: "
                                f"{str(text)[:300]}")
        usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}

        def count(key: str) -> int:
            value = usage.get(key, 0)
            return value if isinstance(value, int) and value >= 0 else 0
        return Completion(text=text, tokens_in=count("prompt_tokens"), tokens_out=count("completion_tokens"))
