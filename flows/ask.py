"""Prefect flows `ask` (one question → evidence package + markdown artifact) and `ask-batch`
(a JSONL of questions, answered with bounded concurrency)."""
from __future__ import annotations

import json
import logging
import os
from datetime import datetime, timezone
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE
from pydantic import BaseModel, Field, field_validator

from schemas.query import EvidencePackage, LoopParams, Question
from schemas.retrieval import Principal
from schemas.settings import MabillonSettings
from tasks.llm.base import Ledger, Provider
from tasks.llm.registry import make_provider
from tasks.query.loop import answer_question
from tasks.query.present import render_markdown
from tasks.query.principals import resolve_principal
from tasks.reading.links import evidence_links_markdown
from tasks.store.layout import StoreLayout

log = logging.getLogger(__name__)


class AskOptions(BaseModel):
    """The parameter form of `ask` and `ask-batch` (everything but the questions)."""

    principal: str | None = Field(None, description="a name in MABILLON_HOME/principals.json; "
                                                    "default: the default principal")
    generation: str | None = Field(None, description="default: the serving generation")
    provider: str | None = Field(None, description="openai | learned | rules | replay | llamacpp; "
                                                   "default: openai when an endpoint is set, "
                                                   "else learned")
    max_sub_questions: int | None = Field(None, ge=1, description="planner cap M")
    step_budget: int | None = Field(None, ge=1, description="effective agent steps per sub-question")
    max_calls: int | None = Field(None, ge=1, description="LLM calls per question")
    max_tokens: int | None = Field(None, ge=1, description="LLM tokens per question")
    as_of: str | None = Field(None, description="ISO 8601 date or time: answer as the archive stood then "
                                                "(validity intervals; default: now)")

    @field_validator("as_of")
    @classmethod
    def _readable_as_of(cls, value: str | None) -> str | None:
        """An unreadable time is refused before anything runs."""
        from schemas.validity import parse_instant

        return parse_instant(value, "as_of").isoformat() if value and value.strip() else None


class AskParams(AskOptions):
    question: str = Field(..., min_length=3)


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
    overrides = {k: v for k, v in (("max_sub_questions", options.max_sub_questions),
                                   ("step_budget", options.step_budget)) if v is not None}
    return settings.query.model_copy(update=overrides)


def ledger_for(settings: MabillonSettings, options: AskOptions) -> Ledger:
    return Ledger(max_calls=options.max_calls or settings.llm.max_calls_per_question,
                  max_tokens=options.max_tokens or settings.llm.max_tokens_per_question)


@task(name="resolve-principal", cache_policy=NONE)
def principal_task(settings: MabillonSettings, name: str | None) -> Principal:
    return resolve_principal(settings, name)


@task(name="open-retriever", cache_policy=NONE)
def retriever_task(settings: MabillonSettings, principal: Principal, generation: str | None,
                   as_of: str | None = None):
    from tasks.query.retriever import Retriever
    return Retriever.open(settings, principal, generation, as_of=as_of)


@task(name="provider", cache_policy=NONE)
def provider_task(settings: MabillonSettings, name: str | None) -> Provider:
    return make_provider(settings.llm, name, api_key(settings))


@task(name="answer", cache_policy=NONE, task_run_name="answer-{question_id}")
def answer_task(retriever, question: str, question_id: str | None, provider: Provider,
                params: LoopParams, layout: StoreLayout, principal: Principal,
                ledger: Ledger) -> EvidencePackage:
    return answer_question(retriever, question, provider, params, question_id=question_id,
                           layout=layout, principal=principal.model_dump(), ledger=ledger)


@flow(name="ask")
def ask(params: AskParams, settings: MabillonSettings | None = None) -> EvidencePackage:
    settings = settings or MabillonSettings()
    principal = principal_task(settings, params.principal)
    retriever = retriever_task(settings, principal, params.generation, params.as_of)
    provider = provider_task(settings, params.provider)
    package = answer_task(retriever, params.question, None, provider, loop_params(settings, params),
                          StoreLayout.from_settings(settings).ensure(), principal,
                          ledger_for(settings, params))
    create_markdown_artifact(key="ask-evidence", markdown=render_markdown(package)
                             + evidence_links_markdown(package, settings.reading_room.url),
                             description="ranked evidence of one TRACE answer")
    return package


def read_questions(path: str, limit: int | None = None) -> list[Question]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                row = json.loads(line)
                out.append(Question(question=row["question"],
                                    question_id=str(row.get("question_id") or n)))
            if limit and len(out) >= limit:
                break
    return out


@flow(name="ask-batch")
def ask_batch(params: AskBatchParams, settings: MabillonSettings | None = None) -> dict:
    settings = settings or MabillonSettings()
    layout = StoreLayout.from_settings(settings).ensure()
    principal = principal_task(settings, params.principal)
    retriever = retriever_task(settings, principal, params.generation, params.as_of)
    provider = provider_task(settings, params.provider)
    questions = read_questions(params.questions_path, params.limit)
    lp = loop_params(settings, params)
    # a sliding window of at most `concurrency` questions in flight keeps memory flat
    futures, packages = [], []
    for q in questions:
        if len(futures) >= params.concurrency:
            packages.append(futures.pop(0).result())
        futures.append(answer_task.submit(retriever, q.question, q.question_id, provider, lp,
                                          layout, principal, ledger_for(settings, params)))
    packages += [f.result() for f in futures]
    out = Path(params.output_path) if params.output_path else layout.reports / (
        f"ask-batch-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for p in packages:
            fh.write(p.model_dump_json() + "\n")
    summary = batch_summary(packages, str(out))
    create_markdown_artifact(key="ask-batch", markdown=batch_markdown(packages, summary),
                             description="TRACE batch: top documents per question")
    return summary


def batch_summary(packages: list[EvidencePackage], output: str) -> dict:
    n = len(packages) or 1
    return {"n": len(packages), "output": output,
            "provider": packages[0].provider if packages else None,
            "llm_calls": sum(p.cost.llm_calls for p in packages),
            "tokens_in": sum(p.cost.tokens_in for p in packages),
            "tokens_out": sum(p.cost.tokens_out for p in packages),
            "model_s_mean": round(sum(p.cost.model_s for p in packages) / n, 4),
            "framework_s_mean": round(sum(p.cost.framework_s for p in packages) / n, 4)}


def batch_markdown(packages: list[EvidencePackage], summary: dict) -> str:
    rows = ["| question | top 3 | accepted | flags |", "|---|---|---|---|"]
    for p in packages:
        top = ", ".join(f"`{d.doc_id}`" for d in p.documents[:3])
        rows.append(f"| {p.question_id}: {p.question[:60]} | {top} | {len(p.accepted)} | "
                    f"{', '.join(p.flags)} |")
    head = (f"{summary['n']} questions, provider {summary['provider']}; framework "
            f"{summary['framework_s_mean']}s and model {summary['model_s_mean']}s per question; "
            f"output `{summary['output']}`")
    return head + "\n\n" + "\n".join(rows)
