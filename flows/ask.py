"""Prefect flows `ask` (one question → evidence package, read in the UI as an artifact) and
`ask-batch` (a JSONL of questions, answered with bounded concurrency).

In a deployment run the asker is whoever holds the access token typed into the form
(flows/run_access.py); without one, the public default principal. `answer` is the same question
answered without Prefect: `mabillon ask` when no server runs, and the warm query service of
`mabillon serve`.
"""
from __future__ import annotations

import logging
from datetime import datetime, timezone
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE
from prefect.states import Failed

from flows.answer import (AUTO, SERVING, AskBatchParams, AskBudgets, AskOptions, AskParams,  # noqa: F401
                          admit, answer_one, api_key, checked_question, open_retriever, provider_for)
from flows.run_access import mask_secret_parameters
from flows.run_names import ask_batch_run_name, ask_run_name
from schemas.query import EvidencePackage, Question
from schemas.retrieval import Principal
from schemas.settings import MabillonSettings
from tasks.eval.questions import load_questions
from tasks.llm.base import Provider
from tasks.markup import Md, md_code, md_row, md_text
from tasks.store.layout import StoreLayout

log = logging.getLogger(__name__)


@task(name="open-retriever", cache_policy=NONE)
def retriever_task(settings: MabillonSettings, principal: Principal, options: AskOptions):
    return open_retriever(settings, principal, options)


@task(name="provider", cache_policy=NONE)
def provider_task(settings: MabillonSettings, options: AskOptions) -> Provider:
    return provider_for(settings, options)


def _answer_run_name() -> str:
    from prefect.runtime import task_run

    question = task_run.parameters.get("question")
    question_id = getattr(question, "question_id", None)
    return f"answer-{question_id}" if question_id else "answer"


# the answer of flows/answer.py, as the flows' task
answer_task = task(name="answer", cache_policy=NONE, task_run_name=_answer_run_name)(answer_one)


def refused(action: str, exc: BaseException):
    """The run ends Failed with the words of `exc` (an artifact, the state message), no traceback."""
    from flows.artifacts.failures import publish_failure

    return Failed(message=publish_failure(action, exc), data=exc)


@flow(name="ask", flow_run_name=ask_run_name,
      description="Answer a researcher's question with ranked, cited source documents.")
def ask(params: AskParams, settings: MabillonSettings | None = None) -> EvidencePackage:
    from flows.artifacts.evidence import publish_evidence

    settings = settings or MabillonSettings()
    mask_secret_parameters()
    try:
        question = Question(question=checked_question(params.question))
        principal, _ = admit(settings, params)
        retriever = retriever_task(settings, principal, params)
        provider = provider_task(settings, params)
    except Exception as exc:  # refusals, and what opening the generation found wrong
        return refused("ask", exc)
    package = answer_task(settings, params, question, principal, retriever, provider)
    publish_evidence(package, settings)
    return package


@flow(name="ask-batch", flow_run_name=ask_batch_run_name,
      description="Answer every question of a JSONL file; one file of evidence packages out.")
def ask_batch(params: AskBatchParams, settings: MabillonSettings | None = None) -> dict:
    settings = settings or MabillonSettings()
    layout = StoreLayout.from_settings(settings).ensure()
    mask_secret_parameters()
    try:
        principal, _ = admit(settings, params)
        retriever = retriever_task(settings, principal, params)
        provider = provider_task(settings, params)
    except Exception as exc:
        return refused("ask-batch", exc)
    # a line without an id is named by its line number
    questions = load_questions(params.questions_path, params.limit, Question, default_id=str,
                               unique_ids=False)
    # a sliding window of at most `concurrency` questions in flight keeps memory flat
    futures, packages = [], []
    for q in questions:
        if len(futures) >= params.concurrency:
            packages.append(futures.pop(0).result())
        futures.append(answer_task.submit(settings, params, q, principal, retriever, provider))
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
        top = Md(", ".join(md_code(d.doc_id) for d in p.documents[:3]))
        rows.append(md_row([f"{p.question_id}: {p.question[:60]}", top, len(p.accepted), ", ".join(p.flags)]))
    head = (f"{summary['n']} questions, provider {md_text(summary['provider'])}; framework "
            f"{summary['framework_s_mean']}s and model {summary['model_s_mean']}s per question; "
            f"output {md_code(summary['output'])}")
    return head + "\n\n" + "\n".join(rows)
