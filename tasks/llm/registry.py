"""Build the provider the settings ask for. No endpoint configured → the offline `learned`
judge when its model file is there, else `rules` (with the reason recorded and flagged)."""
from __future__ import annotations

import logging

from schemas.query import JudgeInfo
from schemas.settings import LlmSettings
from tasks.llm.base import Provider

log = logging.getLogger(__name__)

PROVIDERS = ("openai", "learned", "rules", "replay", "llamacpp")


def provider_name(settings: LlmSettings, override: str | None = None) -> str:
    name = override or settings.provider or ("openai" if settings.base_url else "learned")
    if name not in PROVIDERS:
        raise ValueError(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")
    return name


def make_provider(settings: LlmSettings, override: str | None = None,
                  api_key: str | None = None) -> Provider:
    """`api_key` is resolved by the entry point (settings.api_key or settings.api_key_env)."""
    name = provider_name(settings, override)
    if name == "learned":
        return learned_or_rules(settings, explicit=(override or settings.provider) == "learned")
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


def learned_or_rules(settings: LlmSettings, explicit: bool) -> Provider:
    """The learned judge from its model file. Asked for by name, a missing or corrupt file is
    an error naming it; as the offline default, `rules` decides instead, and every answer
    carries the `judge_fallback_rules` flag and the reason in its judge record."""
    from tasks.llm.judge_model import PACKAGED, JudgeModelError
    from tasks.llm.learned import LearnedProvider
    from tasks.llm.rules import RulesProvider

    path = settings.judge_path or PACKAGED
    try:
        return LearnedProvider.from_file(path)
    except JudgeModelError as exc:
        if explicit:
            raise
        log.warning("%s; the rules policy decides instead", exc)
        rules = RulesProvider(fallback_reason=str(exc))
        rules.judge = JudgeInfo(policy="rules", model_file=str(path), digest=None,
                                fallback=str(exc))
        return rules
