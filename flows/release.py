"""The release flow: sources in, a validated, reconciled, atomically published generation out.

One call per stage, in order; each stage is a Prefect task (parse and embed fan out into one
task per unit of pages and per batch of chunks) on the task runner the settings choose
(flows/runner.py), and each is given only its slice of the settings.
"""
from __future__ import annotations

from prefect import flow
from pydantic import BaseModel, Field

from flows.artifacts.generations import publish_generations
from flows.artifacts.refusals import ended, publish_refusals
from flows.release_gate import gate_applies, hold_for_decision
from flows.release_records import record_routing_change
from flows.runner import RunnerShape, api_for_workers, arm_crash_point, task_runner_for
from flows.settle_deletions import holding_release_slot
from flows.timing import StageClock, publish_stage_seconds, timed
from schemas.generation import IngestResult, Parsed, RunCounts
from schemas.settings import MabillonSettings
from tasks.access.principals import default_principal
from tasks.ingest.acquire import AccessDefaults, AcquireInput, acquire_task
from tasks.ingest.changes import ChangeSet, sort_changes_task
from tasks.ingest.chunk import chunk_task
from tasks.ingest.embed import embed
from tasks.ingest.inspect import inspect_task
from tasks.ingest.merge import StagingInput, serving_base, stage_task
from tasks.ingest.parse.units import parse
from tasks.ingest.publish import Publication, PublishInput, count_run, nothing_new, publish_task
from tasks.ingest.reconcile import reconcile_task
from tasks.ingest.validate import validate_task
from tasks.store.layout import StoreLayout


class ReleaseOptions(BaseModel):
    """What an archivist chooses for one ingest run (the parameter form in the UI)."""

    corpus: str | None = Field(None, description="corpus of inputs that do not name one")
    tenant: str | None = Field(None, description="tenant of inputs that do not name one (default: 'default')")
    groups: list[str] | None = Field(None, description="access groups (default: ['public'])")
    promote: bool = Field(True, description="serve the new generation at once")
    reason: str = Field("ingest", description="recorded in the routing history")
    gate: bool | None = Field(None, description="publish staged, shadow it and wait for a person's decision "
                                                "in the Prefect UI (default: the gate setting)")
    gate_timeout_s: int | None = Field(None, ge=1, description="how long a gated release waits for the "
                                                               "decision (default: the gate setting)")
    defer: list[str] = Field(default_factory=list, description="file:// URIs of folder files left for "
                                                               "the next run (still being written)")


acquire, inspect = timed("acquire", acquire_task), timed("inspect", inspect_task)
sort_changes = timed("plan", sort_changes_task)  # recorded as "plan" in the run's stage timings
parse, chunk, embed = timed("parse", parse), timed("chunk", chunk_task), timed("embed", embed)
stage, validate = timed("stage", stage_task), timed("validate", validate_task)
reconcile, publish = timed("reconcile", reconcile_task), timed("publish", publish_task)


def release_steps(paths: list[str], options: ReleaseOptions | None = None,
                  settings: MabillonSettings | None = None) -> IngestResult:
    # a deployment run names neither: they come from the form's defaults and the serving environment
    options, settings = options or ReleaseOptions(), settings or MabillonSettings()
    layout, runner = StoreLayout.from_settings(settings).ensure(), RunnerShape.of_this_flow_run(settings)
    arm_crash_point(settings.test_crash_point)  # the crash-safety tests' hook, once for the whole run
    gated = gate_applies(options.gate, settings)  # refused before any work where nobody could answer
    result = build_and_publish(paths, options, settings, layout, runner, gated)
    while gated and result.published:  # shadow, then paused until a person decides; the wait holds no lock
        result = hold_for_decision(result, settings, options.gate_timeout_s)
        publish_generations(layout, result.generation, default_principal(settings))  # what the decision changed
        if result.decision != "rebase":
            break
        # another generation was published while it waited: build again on that one (the
        # sources' pages and vectors are cached), and ask again about the rebased candidate
        result = build_and_publish(paths, options, settings, layout, runner, gated)
    return result


def build_and_publish(paths: list[str], options: ReleaseOptions, settings: MabillonSettings,
                      layout: StoreLayout, runner: RunnerShape, gated: bool) -> IngestResult:
    """The stages, under the release slot, on whatever serves now: a generation published
    (staged when gated), or nothing new."""
    with holding_release_slot(layout, settings), StageClock() as clock:
        base = serving_base(layout, settings.embedding)
        acquired = acquire(AcquireInput(sources=paths, defaults=access_defaults(options, settings), layout=layout,
                                        storage=settings.storage, tombstones=base.tombstones, skip=options.defer,
                                        limits=settings.limits))
        screened = inspect(acquired, layout, settings.limits)
        work = sort_changes(screened, base)
        parsed = parse(work, layout, runner.parsing(settings), runner.fan_out())
        if not parsed.documents:
            publish_generations(layout, public=default_principal(settings))
            return nothing_new(base, run_counts(work, parsed, runner, clock), parsed.quarantined, layout,
                               settings.embedding)
        chunked = chunk(parsed, work.to_process, settings.chunking, settings.embedding)
        vectors = embed(chunked.chunks, layout, runner.embedding(settings), chunked.space.space_id,
                        chunked.spec.segmenter_id)
        staged = stage(StagingInput(base=base, revisions=work.to_process, parsed=parsed, chunks=chunked.chunks,
                                    vectors=vectors, space=chunked.space, layout=layout))
        validation = validate(staged, settings.validation, layout)
        report = reconcile(staged, base)
        result = publish(PublishInput(staged=staged, report=report, validation=validation,
                                      run=run_counts(work, parsed, runner, clock), quarantined=parsed.quarantined,
                                      spec=chunked.spec, base=base, layout=layout,
                                      publication=publication(options, settings, gated)))
        if result.serving:
            result.release_record = record_routing_change(layout, result.generation, settings.actor, options.reason)
        publish_generations(layout, result.generation, default_principal(settings))
    result.run.stage_seconds = clock.seconds
    return result


def release_run(paths: list[str], options: ReleaseOptions | None = None,
                settings: MabillonSettings | None = None):
    """The release, then what an archivist reads of it: the stage timings and refusals as
    tables, and a final state that says how many inputs were refused (flows/artifacts/refusals.py)."""
    result = release_steps(paths, options, settings)
    publish_stage_seconds(result.run.stage_seconds)
    publish_refusals(result.quarantined)
    return ended(result)


# The flow wraps a module-level function: Dask workers receive the flow run's context, and a
# function found under its own name is sent by reference, not pickled with everything it uses.
release_flow = flow(name="release", log_prints=False)(release_run)


def release(paths: list[str], options: ReleaseOptions | None = None,
            settings: MabillonSettings | None = None) -> IngestResult:
    """Run the release flow on the task runner the settings choose (MABILLON_RUNNER)."""
    settings = settings or MabillonSettings()
    with api_for_workers(settings):
        runner = release_flow.with_options(task_runner=task_runner_for(settings))
        return runner([str(p) for p in paths], options or ReleaseOptions(), settings)


def access_defaults(options: ReleaseOptions, settings: MabillonSettings) -> AccessDefaults:
    return AccessDefaults(corpus=options.corpus, tenant=options.tenant or settings.default_tenant,
                          groups=tuple(options.groups or settings.default_groups))


def publication(options: ReleaseOptions, settings: MabillonSettings, gated: bool = False) -> Publication:
    # A gated candidate is published staged: it serves only once a person approves it.
    return Publication(promote=options.promote and not gated, reason=options.reason, actor=settings.actor,
                       target_tokens=settings.chunking.target_tokens,
                       embedding_model=settings.embedding.model, index=settings.index,
                       retrieval=settings.retrieval,
                       limits={"inspection": settings.limits.model_dump(), "sandbox": settings.sandbox.model_dump()},
                       embedding=settings.embedding)


def run_counts(work: ChangeSet, parsed: Parsed, runner: RunnerShape, clock: StageClock) -> RunCounts:
    return count_run(work, parsed, runner.name, runner.workers, clock.seconds)
