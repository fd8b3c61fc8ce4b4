"""Which provider the settings select; the learned judge is the offline default."""
from __future__ import annotations

import pytest

from schemas.settings import LlmSettings
from tasks.llm.registry import make_provider, provider_name


def test_the_learned_judge_is_the_default_without_an_endpoint_and_rules_stays():
    assert provider_name(LlmSettings()) == "learned"
    assert make_provider(LlmSettings()).name == "learned"
    assert make_provider(LlmSettings(), "rules").name == "rules"


def test_an_endpoint_selects_openai_and_an_override_wins():
    s = LlmSettings(base_url="http://127.0.0.1:9/v1", model="m")
    assert provider_name(s) == "openai" and make_provider(s, api_key="k").name == "openai"
    assert provider_name(s, "rules") == "rules"


def test_misconfigured_providers_are_refused_with_what_to_set():
    with pytest.raises(ValueError, match="unknown provider"):
        provider_name(LlmSettings(), "gpt")
    with pytest.raises(ValueError, match="MABILLON_LLM__MODEL"):
        make_provider(LlmSettings(provider="openai", base_url="http://x/v1"))
    with pytest.raises(ValueError, match="REPLAY_PATH"):
        make_provider(LlmSettings(provider="replay"))
