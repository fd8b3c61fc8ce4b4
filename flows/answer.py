"""A question answered: the parameters of `ask` and `ask-batch` and the answer itself, without
Prefect. `mabillon ask` uses this directly when no server runs (no Prefect import, no server
start), and so does the warm query service of `mabillon serve`; the `ask` and `ask-batch` flows
run `answer_one` as their answer task, on a retriever and a provider opened as tasks of their own.
"""
from __future__ import annotations

import os

from pydantic import BaseModel, Field, SecretStr, field_validator

from flows.run_access import Refusal, run_principal
from schemas.query import EvidencePackage, LoopParams, Question
from schemas.retrieval import Principal
from schemas.settings import MabillonSettings
from tasks.llm.base import Ledger, Provider
from tasks.llm.registry import make_provider
from tasks.query.loop import answer_question
from tasks.store.layout import StoreLayout

SERVING = "serving"  # the generation choice that follows the routing record
AUTO = "auto"  # the provider choice that follows the settings


class AskBudgets(BaseModel):
    """Limits of one answer (the defaults are the server's)."""

    max_sub_questions: int | None = Field(None, ge=1, description="sub-questions the planner may make")
    step_budget: int | None = Field(None, ge=1, description="agent steps per sub-question")
    max_calls: int | None = Field(None, ge=1, description="LLM calls per question")
    max_tokens: int | None = Field(None, ge=1, description="LLM tokens per question")


class AskOptions(BaseModel):
    """Who asks, which generation, who judges, and the budgets of the answers."""

    access_token: SecretStr | None = Field(
        None, title="Access token", description="your reader's token, if you have one; without it "
        "you search the public collections only")
    generation: str | None = Field(SERVING, title="Generation",
                                   description="which published index to search")
    provider: str | None = Field(AUTO, title="Judge", description="who reviews the passages: "
                                 "auto (the server's choice: openai when an endpoint is set, else "
                                 "learned), learned (the offline trained judge), rules (offline), "
                                 "openai (the configured endpoint), replay, llamacpp")
    budgets: AskBudgets | None = Field(None, title="Advanced: budgets",
                                       description="leave empty for the server's defaults")
    as_of: str | None = Field(None, title="As of", description="ISO 8601 date or time (2027-01-01, "
                              "2027-01-01T09:00+01:00): answer as the archive stood then (validity "
                              "intervals); empty: now. A future time needs an operator's token")
    # In-process callers only (the CLI, tests): a deployment run never trusts a typed name.
    principal: str | None = Field(None, description="in-process only: a name in principals.json")
    # Flat budget fields of earlier versions, still accepted in-process.
    max_sub_questions: int | None = Field(None, ge=1)
    step_budget: int | None = Field(None, ge=1)
    max_calls: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)

    @field_validator("as_of")
    @classmethod
    def _readable_as_of(cls, value: str | None) -> str | None:
        """An unreadable time is refused before anything runs."""
        from schemas.validity import parse_instant

        return parse_instant(value, "as_of").isoformat() if value and value.strip() else None

    def budget(self, name: str) -> int | None:
        nested = getattr(self.budgets, name) if self.budgets is not None else None
        return nested if nested is not None else getattr(self, name)

    def generation_name(self) -> str | None:
        return None if self.generation in (None, "", SERVING) else self.generation

    def provider_name(self) -> str | None:
        return None if self.provider in (None, "", AUTO) else self.provider


class AskParams(AskOptions):
    """Ask the archive: the documents that answer, each with its passage."""

    question: str = Field(..., min_length=3, title="Question",
                          description="in French or English, as you would ask an archivist")


class AskBatchParams(AskOptions):
    questions_path: str = Field(..., description="JSONL of {question_id, question, ...}")
    concurrency: int = Field(4, ge=1, le=64)
    limit: int | None = Field(None, ge=1)
    output_path: str | None = Field(None, description="default: <manifests>/reports/ask-batch-*.jsonl")


def api_key(settings: MabillonSettings) -> str | None:
    """Entry-point concern: the key comes from settings or the variable they name."""
    if settings.llm.api_key is not None:
        return settings.llm.api_key.get_secret_value()
    return os.environ.get(settings.llm.api_key_env) if settings.llm.api_key_env else None


def loop_params(settings: MabillonSettings, options: AskOptions) -> LoopParams:
    overrides = {k: v for k in ("max_sub_questions", "step_budget")
                 if (v := options.budget(k)) is not None}
    return settings.query.model_copy(update=overrides)


def ledger_for(settings: MabillonSettings, options: AskOptions) -> Ledger:
    return Ledger(max_calls=options.budget("max_calls") or settings.llm.max_calls_per_question,
                  max_tokens=options.budget("max_tokens") or settings.llm.max_tokens_per_question)


def checked_question(text: str) -> str:
    question = " ".join(text.split())
    if len(question) < 3:
        raise Refusal("The question is empty: write at least three characters.")
    return question


def admit(settings: MabillonSettings, params: AskOptions) -> tuple[Principal, str | None]:
    """Who asks and which generation, refused in words before any work is done."""
    from tasks.ops.switching import GenerationUnavailable, check_servable
    from tasks.store.routing import read_routing

    principal = run_principal(settings, params.access_token, params.principal)
    generation = params.generation_name()
    if generation is not None:
        layout = StoreLayout.from_settings(settings)
        try:
            check_servable(layout, generation, read_routing(layout))
        except GenerationUnavailable:
            raise Refusal(f"There is no generation {generation!r} to search; choose one the "
                          "form offers (or leave it on 'serving').", "not_found") from None
    return principal, generation


def open_retriever(settings: MabillonSettings, principal: Principal, options: AskOptions):
    """The generation the options name (or the principal's route), opened for the principal."""
    from tasks.query.retriever import Retriever

    return Retriever.open(settings, principal, options.generation_name(), as_of=options.as_of)


def provider_for(settings: MabillonSettings, options: AskOptions) -> Provider:
    return make_provider(settings.llm, options.provider_name(), api_key(settings))


def answer(settings: MabillonSettings, params: AskParams, principal: Principal,
           retriever=None, provider: Provider | None = None) -> EvidencePackage:
    """The question answered without Prefect (the flows run the same `answer_one`)."""
    return answer_one(settings, params, Question(question=checked_question(params.question)), principal,
                      retriever, provider)


def answer_one(settings: MabillonSettings, options: AskOptions, question: Question, principal: Principal,
               retriever=None, provider: Provider | None = None) -> EvidencePackage:
    """One question under `options` (a batch's questions as its file gives them); the retriever
    and the provider are opened here unless a caller keeps them open."""
    retriever = retriever or open_retriever(settings, principal, options)
    provider = provider or provider_for(settings, options)
    return answer_question(retriever, question.question, provider, loop_params(settings, options),
                           question_id=question.question_id, layout=StoreLayout.from_settings(settings).ensure(),
                           principal=principal.model_dump(), ledger=ledger_for(settings, options))
