"""The `harvest` flow: fetch newspaper issues from Gallica into package folders, then release them.

"Harvest Le Gaulois 1887 nightly" is this flow's deployment on a cron (MABILLON_SERVE__HARVEST_CRON)
with its default request (MABILLON_SERVE__HARVEST). Each run asks Gallica only for what the
home's harvest cache lacks, so a nightly run over a finished year fetches nothing and releases
unchanged packages (same bytes, same revisions: nothing re-parsed).
"""
from __future__ import annotations

import logging

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from pydantic import BaseModel, Field

from flows.release import ReleaseOptions, release
from schemas.generation import IngestResult
from schemas.harvest import HarvestReport, HarvestRequest
from schemas.settings import MabillonSettings
from tasks.harvest.client import user_agent
from tasks.harvest.harvest import harvest
from tasks.markup import md_code, md_text

log = logging.getLogger(__name__)


class HarvestParams(BaseModel):
    """The parameter form of a Gallica harvest."""

    request: HarvestRequest = Field(description="an issue ARK, a title ARK with a date range, or an SRU query")
    options: ReleaseOptions = Field(default_factory=lambda: ReleaseOptions(reason="gallica harvest"))
    release: bool = Field(True, description="publish the harvested issues (off: fetch only)")


class HarvestOutcome(BaseModel):
    report: HarvestReport
    result: IngestResult | None = None


harvest_task = task(name="harvest", retries=0)(harvest)


def harvest_run_name() -> str:
    from prefect.runtime import flow_run

    params = flow_run.parameters.get("params") or {}
    params = params if isinstance(params, dict) else params.model_dump()
    request = params.get("request") or {}
    what = request.get("sru_query") or request.get("ark") or "?"
    span = f" {request.get('date_from')}→{request.get('date_to')}" if request.get("date_from") else ""
    return f"harvest {str(what)[:60]}{span}"


def summary_markdown(outcome: HarvestOutcome) -> str:
    report = outcome.report
    lines = ["# Gallica harvest", "", f"- request: {md_text(report.request.describe())}",
             f"- issues harvested: {len(report.issues)} ({report.requests} requests to Gallica, "
             f"{report.from_cache} answers from the cache)"]
    lines += [f"  - {md_code(i.ark)} {md_text(str(i.date or ''))}: {i.pages} pages" for i in report.issues]
    if report.quarantined:
        lines.append(f"- quarantined: {len(report.quarantined)}")
        lines += [f"  - {md_code(q.ark)}: {md_text(q.reason)}" for q in report.quarantined]
    result = outcome.result
    if result is not None:
        lines.append(f"- generation {md_code(result.generation)}: "
                     + md_text(", ".join(f"{k} {v}" for k, v in result.run.model_dump().items()
                                         if isinstance(v, int))))
    return "\n".join(lines)


@flow(name="harvest", flow_run_name=harvest_run_name,
      description="Archivists: fetch newspaper issues from Gallica (an issue, a title's date range "
                  "or a search) politely and resumably, and publish them.")
def harvest_flow(params: HarvestParams, settings: MabillonSettings | None = None) -> HarvestOutcome:
    settings = settings or MabillonSettings()
    report = harvest_task(params.request, settings.gallica, settings.home, user_agent(settings.gallica))
    log.info("harvested %d issue(s) of %s; %d quarantined; %d requests, %d answers from the cache",
             len(report.issues), report.request.describe(), len(report.quarantined), report.requests,
             report.from_cache)
    result = release(report.folders, params.options, settings) if params.release and report.folders else None
    outcome = HarvestOutcome(report=report, result=result)
    create_markdown_artifact(key="harvest", markdown=summary_markdown(outcome),
                             description="issues fetched from Gallica and what was published")
    return outcome
