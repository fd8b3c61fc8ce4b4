"""Build the provider the settings ask for. No endpoint configured → `rules` (offline)."""
from __future__ import annotations

from schemas.settings import LlmSettings
from tasks.llm.base import Provider

PROVIDERS = ("openai", "rules", "replay", "llamacpp")


def provider_name(settings: LlmSettings, override: str | None = None) -> str:
    name = override or settings.provider or ("openai" if settings.base_url else "rules")
    if name not in PROVIDERS:
        raise ValueError(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")
    return name


def make_provider(settings: LlmSettings, override: str | None = None,
                  api_key: str | None = None) -> Provider:
    """`api_key` is resolved by the entry point (settings.api_key or settings.api_key_env)."""
    name = provider_name(settings, override)
    if name == "rules":
        from tasks.llm.rules import RulesProvider
        return RulesProvider()
    if name == "openai":
        if not settings.base_url or not settings.model:
            raise ValueError("the openai provider needs MABILLON_LLM__BASE_URL and "
                             "MABILLON_LLM__MODEL")
        from tasks.llm.openai_http import OpenAIProvider
        return OpenAIProvider(settings.base_url, settings.model, api_key,
                              timeout_s=settings.timeout_s, max_retries=settings.max_retries,
                              backoff_s=settings.backoff_s,
                              response_format=settings.response_format,
                              temperature=settings.temperature,
                              max_output_tokens=settings.max_output_tokens)
    if name == "replay":
        if settings.replay_path is None:
            raise ValueError("the replay provider needs MABILLON_LLM__REPLAY_PATH (a query record)")
        from tasks.llm.replay import ReplayProvider
        return ReplayProvider.from_record(settings.replay_path)
    from tasks.llm.llamacpp import LlamaCppProvider
    return LlamaCppProvider(settings.gguf_path, max_output_tokens=settings.max_output_tokens,
                            temperature=settings.temperature)
