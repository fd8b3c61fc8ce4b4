"""The evaluate flow: a question set against one or more systems on one generation,
published as Parquet rows, a report folder and Prefect artifacts."""
from __future__ import annotations

import logging
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE
from pydantic import BaseModel, Field, SecretStr

from schemas.settings import MabillonSettings
from tasks.eval.questions import load_questions
from tasks.eval.report import build_report, markdown_summary, write_run
from tasks.eval.run import evaluate as run_system
from tasks.eval.systems import SYSTEMS, Baseline, System, Trace
from flows.run_access import mask_secret_parameters, run_principal
from tasks.query.retriever import Retriever

log = logging.getLogger(__name__)


class EvalOptions(BaseModel):
    """The parameter form of one evaluation run."""

    systems: list[str] = Field(default_factory=lambda: ["bm25", "dense", "hybrid"],
                               description=f"any of {', '.join(SYSTEMS)}")
    ks: list[int] = Field(default_factory=lambda: [3, 5, 10], description="cut-offs of recall@k")
    limit: int | None = Field(None, description="first N questions only")
    provider: str | None = Field(None, description="LLM provider of `trace` (default: settings)")
    concurrency: int = Field(1, ge=1, description="questions answered at once")
    access_token: SecretStr | None = Field(None, description="a reader's token: evaluate over "
                                           "what it may see (default: the public material)")
    principal: str | None = Field(None, description="in-process only: a name from principals.json")
    generation: str | None = Field(None, description="default: the serving generation")
    report_dir: str | None = Field(None, description="folder for rows, plots and the report")


def make_system(name: str, depth: int, options: EvalOptions, settings: MabillonSettings) -> System:
    if name in ("bm25", "dense", "hybrid"):
        return Baseline(name=name, depth=depth)
    if name == "trace":
        from flows.answer import api_key
        from tasks.llm.base import Ledger
        from tasks.llm.registry import make_provider

        llm = settings.llm
        return Trace(provider=make_provider(llm, options.provider, api_key(settings)),
                     params=settings.query,
                     new_ledger=lambda: Ledger(max_calls=llm.max_calls_per_question,
                                               max_tokens=llm.max_tokens_per_question))
    raise ValueError(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")


def trained_on(system: System, questions_path: str) -> bool:
    """Whether the system's learned judge was trained on this very question file: its figures
    there are not validation (`mabillon train-judge --cv K` gives the honest ones)."""
    import hashlib

    judge = getattr(getattr(system, "provider", None), "judge_model", None)
    if judge is None:
        return False
    digest = "sha256:" + hashlib.sha256(Path(questions_path).read_bytes()).hexdigest()
    return judge.trained.get("questions_sha256") == digest


@task(name="evaluate-system", cache_policy=NONE)
def evaluate_system(retriever: Retriever, system: System, questions, ks, concurrency):
    return run_system(retriever, system, questions, ks, concurrency)


@flow(name="evaluate", description="Recall@k and MRR of retrieval systems on a question set.")
def evaluate(questions_path: str, options: EvalOptions | None = None,
             settings: MabillonSettings | None = None) -> list[dict]:
    options = options or EvalOptions()
    settings = settings or MabillonSettings()
    mask_secret_parameters()
    questions = load_questions(Path(questions_path), options.limit)
    principal = run_principal(settings, options.access_token, options.principal)
    retriever = Retriever.open(settings, principal, options.generation)
    depth = max(max(options.ks), 20)
    summaries = []
    for name in options.systems:
        system = make_system(name, depth, options, settings)
        rows, summary = evaluate_system(retriever, system, questions, options.ks,
                                        options.concurrency)
        if trained_on(system, questions_path):
            log.warning("the learned judge was trained on %s: these figures are not validation; "
                        "`mabillon train-judge --cv 5` reports cross-validated ones", questions_path)
            summary["judge_trained_on_these_questions"] = True
        summaries.append(summary)
        if options.report_dir:
            write_run(Path(options.report_dir), summary, rows)
        publish_artifacts(summary)
    if options.report_dir:
        build_report(Path(options.report_dir))
    create_markdown_artifact(key="evaluation-summary", markdown=markdown_summary(summaries),
                             description=f"{len(questions)} questions, generation "
                                         f"{retriever.generation}")
    return summaries


def publish_artifacts(summary: dict) -> None:
    """One table artifact per system: metrics overall and by question type."""
    rows = [{"question_type": "overall", "n": summary["n"], **summary["overall"]}]
    rows += [{"question_type": t, **m} for t, m in summary["by_type"].items()]
    create_table_artifact(key=f"evaluation-{summary['system']}", table=rows,
                          description=f"{summary['system']} on {summary['generation']}")
