"""The `train-judge` flow: the learned judge trained from a development question set over the
serving generation, saved as the small model file the `learned` policy loads, and — with
`cv_folds` — validated honestly: fold models trained without each fold's questions (folds split
by gold set), the loop run with them on the held-out questions, compared with `hybrid` and
`trace`+`rules` on the same generation. Only those cross-validated figures are reported; the
saved model (trained on every question) is not evaluated on its own training questions."""
from __future__ import annotations

import hashlib
import json
import logging
import platform
import time
from pathlib import Path

import pyarrow as pa
from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE
from pydantic import BaseModel, Field

from schemas.settings import MabillonSettings
from tasks.access.principals import resolve_principal
from tasks.eval.judge_data import JudgeData, collect
from tasks.eval.judge_training import (brier, cross_validate, fit, reliability, row_groups)
from tasks.eval.questions import load_questions
from tasks.llm.base import Ledger
from tasks.llm.judge_model import PACKAGED
from tasks.llm.rules import RulesProvider
from tasks.markup import md_code, md_row, md_text
from tasks.query.retriever import Retriever

log = logging.getLogger(__name__)


class TrainJudgeOptions(BaseModel):
    questions: str = Field(..., description="development questions (JSONL with gold_ids)")
    output: str = Field(str(PACKAGED), description="where the model file is written")
    cv_folds: int = Field(0, ge=0, description="outer folds for the honest figures; 0: none")
    report_dir: str | None = Field(None, description="folder for the cross-validated report")
    concurrency: int = Field(2, ge=1)
    generation: str | None = None
    command: str = Field("", description="the command line, recorded in the model file")


@task(name="collect-judge-rows", cache_policy=NONE)
def collect_rows(retriever, questions, params, concurrency) -> JudgeData:
    return collect(retriever, questions, RulesProvider(), params, concurrency)


def _digest(path: str) -> str:
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


@flow(name="train-judge")
def train_judge(options: TrainJudgeOptions, settings: MabillonSettings | None = None) -> dict:
    settings = settings or MabillonSettings()
    started = time.perf_counter()
    questions = load_questions(Path(options.questions))
    retriever = Retriever.open(settings, resolve_principal(settings), options.generation)
    retriever.prime([q.question for q in questions])
    params = settings.query
    data = collect_rows(retriever, questions, params, options.concurrency)
    collect_s = time.perf_counter() - started
    model = fit(data, row_groups(data, questions))
    model.trained.update({
        "version": f"judge-{time.strftime('%Y%m%d')}",
        "questions_file": Path(options.questions).name,
        "questions_sha256": _digest(options.questions), "generation": retriever.generation,
        "space_id": retriever.space_id, "command": options.command,
        "collect_s": round(collect_s, 1), "sklearn": _sklearn_version(),
        "python": platform.python_version()})
    model.trained["train_s"] = round(time.perf_counter() - started, 1)
    digest = model.save(Path(options.output))
    result = {"model_file": options.output, "digest": digest, "rows": int(len(data.y)),
              "positives": int(data.y.sum()), "questions": len(questions),
              "generation": retriever.generation, "train_s": model.trained["train_s"],
              "bytes": Path(options.output).stat().st_size}
    if options.cv_folds:
        result["cv"] = validate(retriever, questions, data, params, options)
    create_markdown_artifact(key="train-judge", markdown=_markdown(result),
                             description="the learned judge: model file and cross-validated figures")
    return result


def validate(retriever, questions, data, params, options: TrainJudgeOptions) -> dict:
    from tasks.eval.report import write_run
    from tasks.eval.run import evaluate
    from tasks.eval.systems import Baseline, Trace

    ks = (3, 5, 10)
    table, learned, extras = cross_validate(retriever, questions, data, params,
                                            k=options.cv_folds, concurrency=options.concurrency)
    summaries = {"trace+learned": (learned, table)}
    for system in (Baseline("hybrid", 20), Trace(RulesProvider(), params, Ledger,
                                                 name="trace+rules")):
        rows, summary = evaluate(retriever, system, questions, ks, options.concurrency)
        summaries[system.name] = (summary, rows)
    p, y = extras["probabilities"], extras["labels"]
    calibration = {"bins": reliability(p, y), "brier": brier(p, y), "rows": int(len(y))}
    if options.report_dir:
        folder = Path(options.report_dir)
        for summary, rows in summaries.values():
            write_run(folder, summary, rows if isinstance(rows, pa.Table) else pa.table(rows))
        (folder / "calibration.json").write_text(json.dumps(calibration, indent=2), "utf-8")
    return {"systems": {name: s for name, (s, _) in summaries.items()},
            "calibration": calibration, "fold_train_s": round(extras["train_s"], 1)}


def _sklearn_version() -> str:
    import sklearn

    return sklearn.__version__


def _markdown(result: dict) -> str:
    lines = [f"Model {md_code(result['model_file'])} ({result['bytes']} bytes, {md_text(result['digest'])}), "
             f"{result['rows']} rows from {result['questions']} questions, "
             f"{result['train_s']} s."]
    cv = result.get("cv")
    if cv:
        lines += ["", "| system | recall@10 | mrr_multi | p_acc | r_acc |", "|---|---|---|---|---|"]
        for name, s in cv["systems"].items():
            o = s["overall"]
            lines.append(md_row([name, f"{o['recall@10']:.3f}", f"{o['mrr_multi']:.3f}",
                                 f"{o['p_acc'] or 0:.3f}", f"{o['r_acc'] or 0:.3f}"]))
    return "\n".join(lines)
