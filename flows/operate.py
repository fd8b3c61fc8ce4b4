"""Operator flows: promote, roll back, canary, delete (mask now, new generation, purge), collect
garbage.

Run from a deployment (the UI, the API) each needs an operator's access token and the operator's
name, both recorded in the routing history (flows/run_access.py); called in-process (the CLI)
they run for the owner of the state root. Each shows what it changed as artifacts: the routing
switch in words, the generations table, and the last diff.
"""
from __future__ import annotations

import logging
import time
from datetime import timedelta

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.states import Failed
from pydantic import BaseModel, Field, SecretStr

from flows.release_records import record_routing_change
from flows.run_access import Refusal, deployment_run, mask_secret_parameters, run_actor
from flows.run_names import canary_run_name, delete_run_name, gc_run_name, promote_run_name, rollback_run_name
from flows.settle_deletions import Settlement, holding_release_slot, settle_deletions
from schemas.generation import RoutingRecord
from schemas.settings import MabillonSettings
from tasks.access.principals import default_principal
from tasks.markup import md_text
from tasks.ops import canary as canaries
from tasks.ops import switching
from tasks.ops.retention import GcReport, PurgeReport, collect_garbage
from tasks.store.documents import unknown_documents
from tasks.store.layout import StoreLayout
from tasks.store.manifests import read_manifest
from tasks.store.routing import read_routing
from tasks.store.serialise import serialised_release
from tasks.store.tombstones import add_tombstones

log = logging.getLogger(__name__)


class OperatorFields(BaseModel):
    """Who acts: required in the UI (the form marks them), optional in-process."""

    operator: str | None = Field(None, title="Your name", description="recorded in the routing history")
    operator_token: SecretStr | None = Field(None, title="Operator's access token",
                                             description="an access token with the operator role")


class PromoteParams(OperatorFields):
    generation: str = Field(description="generation to serve, e.g. g0003")
    reason: str = Field("", description="recorded in the routing history")


class CanaryParams(OperatorFields):
    generation: str | None = Field(None, description="candidate served to the groups below (with stop: "
                                                     "whose canary ends; default every canary)")
    groups: list[str] = Field(default_factory=list, description="groups of principals routed to the candidate")
    reason: str = Field("", description="recorded in the routing history and the release record")
    stop: bool = Field(False, description="end the canary instead of starting one")


class RollbackParams(OperatorFields):
    to: str | None = Field(None, description="generation to return to (default: the previously serving one)")
    reason: str = Field("", description="recorded in the routing history")


class DeleteParams(OperatorFields):
    doc_ids: list[str] = Field(description="documents to delete everywhere (see `mabillon documents`)")
    reason: str = Field("", description="why (rights, request, error): kept with the tombstone")
    force: bool = Field(False, description="tombstone ids the serving generation does not hold "
                                           "(e.g. to refuse a document before it is ever ingested)")


class GcParams(OperatorFields):
    pass


class DeletionResult(BaseModel):
    doc_ids: list[str]
    unknown: list[str]
    generation: str | None
    masked_after_s: float  # delete → gone from answers (tombstone in force)
    published_after_s: float | None  # → a generation without them serves
    purged_after_s: float | None  # → gone from disk (None while the retention window runs)
    purge: PurgeReport | None = None
    # Set when a release held the slot: the mask holds, and the new generation and the purge
    # follow when that holder ends (it settles them).
    behind: str | None = None


def _refused(action: str, exc: BaseException):
    from flows.artifacts.failures import publish_failure

    return Failed(message=publish_failure(action, exc), data=exc)


def _show_state(layout: StoreLayout, routing: RoutingRecord, changed: bool,
                settings: MabillonSettings) -> None:
    from flows.artifacts.generations import publish_generations

    create_markdown_artifact(key="routing", markdown=routing_markdown(routing, changed),
                             description="what serves now")
    publish_generations(layout, public=default_principal(settings))


def routing_markdown(routing: RoutingRecord, changed: bool = True) -> str:
    last = routing.history[-1] if routing.history else None
    lines = [f"# Serving: {md_text(routing.serving)}"]
    lines += [f"Canary: {md_text(c.generation)} → groups {md_text(', '.join(c.groups))} "
              f"(since {c.since:%Y-%m-%d %H:%M:%S})" for c in routing.canaries]
    if not changed:
        lines.append(f"{md_text(routing.serving)} was already serving; nothing changed.")
    elif last:
        lines.append(f"{md_text(last.action)} by {md_text(last.actor)} at {last.at:%Y-%m-%d %H:%M:%S}: "
                     f"{md_text(last.from_generation)} → {md_text(last.to_generation)}. {md_text(last.reason)}")
    return "\n\n".join(lines)


def _switch(action: str, settings: MabillonSettings | None, params: OperatorFields, switch):
    """One routing switch under the release serialisation, shown in the UI."""
    settings = settings or MabillonSettings()
    mask_secret_parameters()
    layout = StoreLayout.from_settings(settings)
    try:
        actor = run_actor(settings, params.operator_token, params.operator)
        with holding_release_slot(layout, settings):
            before = read_routing(layout)
            routing = switch(layout, actor)
    except (Refusal, switching.GenerationUnavailable, canaries.CanaryRefused) as exc:
        return _refused(action, exc)
    _show_state(layout, routing, len(routing.history) > len(before.history), settings)
    return routing


@flow(name="promote", flow_run_name=promote_run_name,
      description="Operators: serve another published generation (one atomic switch of index and "
                  "query encoder). Shows what serves now and the generations.")
def promote(params: PromoteParams, settings: MabillonSettings | None = None) -> RoutingRecord:
    def switch(layout: StoreLayout, actor: str) -> RoutingRecord:
        before = read_routing(layout)
        switching.check_servable(layout, params.generation, before)
        # An operator may serve a candidate built before the serving generation (an explicit
        # act, unlike a gate's approval, which is refused then): it goes on, and the routing
        # history, this run and the release record say what it leaves out.
        since = switching.published_since(layout, params.generation, before)
        reason = params.reason
        if since:
            words = switching.since_words(params.generation, read_manifest(layout, params.generation).parent, since)
            log.warning("promote %s: %s", params.generation, words)
            reason = f"{reason} (note: {words})".strip()
        routing = switching.promote(layout, params.generation, actor, reason)
        if routing.serving != before.serving:
            record_routing_change(layout, params.generation, actor, params.reason, action="promote", via="promote")
        return routing
    return _switch("promote", settings, params, switch)


@flow(name="canary", flow_run_name=canary_run_name,
      description="Operators: serve a candidate generation to named groups of principals only "
                  "(everyone else stays on the serving one); promote, rollback or stop end it.")
def canary(params: CanaryParams, settings: MabillonSettings | None = None) -> RoutingRecord:
    """Route named groups to a candidate (everyone else stays on the serving generation), or end it."""
    settings = settings or MabillonSettings()

    def switch(layout: StoreLayout, actor: str) -> RoutingRecord:
        if params.stop:
            return canaries.stop(layout, actor, params.reason, params.generation)
        if not params.generation:
            raise canaries.CanaryRefused("name the candidate generation the groups are routed to")
        routing = canaries.start(layout, settings, params.generation, params.groups, actor, params.reason)
        record_routing_change(layout, params.generation, actor, params.reason, action="canary", via="canary")
        return routing
    return _switch("canary", settings, params, switch)


@flow(name="rollback", flow_run_name=rollback_run_name,
      description="Operators: serve the previously serving generation again (or the one named).")
def rollback(params: RollbackParams, settings: MabillonSettings | None = None) -> RoutingRecord:
    return _switch("rollback", settings, params, lambda layout, actor: switching.rollback(
        layout, actor, params.to, params.reason))


def unknown_words(unknown: dict[str, list[str]]) -> str:
    # No "did you mean": these words are the run's state and artifact, which every UI user reads,
    # and the nearest ids may be another tenant's (tasks/ops/disclosure.py); the CLI suggests them.
    parts = [repr(d) for d in unknown]
    return (f"no document {', '.join(parts)} in the serving generation; nothing was deleted. "
            "Force it to tombstone an id that is not ingested yet.")


@flow(name="delete", flow_run_name=delete_run_name,
      description="Operators: delete documents from every answer at once and from every copy on "
                  "disk (a rights request, an error). Needs a reason.")
def delete(params: DeleteParams, settings: MabillonSettings | None = None) -> DeletionResult:
    """Mask at once, publish a generation without them, purge now or after the window."""
    settings = settings or MabillonSettings()
    mask_secret_parameters()
    layout = StoreLayout.from_settings(settings).ensure()
    doc_ids = list(dict.fromkeys(d.strip() for d in params.doc_ids if d.strip()))
    try:
        actor = run_actor(settings, params.operator_token, params.operator)
        if not doc_ids:
            raise Refusal("name at least one document to delete")
        if deployment_run() and not params.reason.strip():
            raise Refusal("give the reason for this deletion: it is kept with the tombstone")
        unknown = unknown_documents(layout, doc_ids)
        if unknown and not params.force:
            raise Refusal(unknown_words(unknown))
    except Refusal as exc:
        return _refused("delete", exc)
    start = time.perf_counter()
    add_tombstones(layout, doc_ids, actor, params.reason)  # the mask, for every generation, now
    masked = time.perf_counter() - start
    # the new generation and the purge, unless a release holds the slot: it settles them as it ends
    result = deletion_result(doc_ids, masked, settle_deletions(layout, settings), start, layout)
    create_markdown_artifact(key="deletion", markdown=deletion_markdown(result, actor, params.reason))
    from flows.artifacts.generations import publish_generations

    publish_generations(layout, public=default_principal(settings))
    return result


def deletion_result(doc_ids: list[str], masked_after_s: float, settled: Settlement | None,
                    start: float, layout: StoreLayout) -> DeletionResult:
    result = DeletionResult(doc_ids=doc_ids, unknown=[], generation=read_routing(layout).serving,
                            masked_after_s=masked_after_s, published_after_s=None, purged_after_s=None)
    if settled is None:  # settled meanwhile by a holder of the slot that ended
        return result
    if not set(doc_ids) <= set(settled.doc_ids):  # the slot was held: its holder settles them
        return result.model_copy(update={"behind": settled.behind})
    return result.model_copy(update={
        "unknown": [d for d in doc_ids if d in settled.unknown], "generation": settled.generation,
        "published_after_s": settled.published_at - start if settled.published_at else None,
        "purged_after_s": settled.purged_at - start if settled.purged_at else None,
        "purge": settled.purge})


def deletion_markdown(r: DeletionResult, actor: str, reason: str) -> str:
    """Counted, not named: every UI user reads this artifact (tasks/ops/disclosure.py), and a
    deleted document is nobody's to see; `mabillon documents` and the tombstones name them."""
    tombstoned_only = len([d for d in r.doc_ids if d in r.unknown])
    lines = [f"# Deleted {len(r.doc_ids)} document(s)", "",
             f"By {md_text(actor)}: {md_text(reason or '(no reason given)')}", "",
             *([f"{tombstoned_only} of them not in the serving generation: tombstoned only.", ""]
               if tombstoned_only else []),
             f"Gone from answers after {r.masked_after_s * 1000:.1f} ms."]
    if r.behind:
        lines.append(f"The release slot was held by {r.behind}: the generation without them, and "
                     "their removal from disk, follow as it ends.")
        return "\n".join(lines)
    if r.published_after_s is not None:
        lines.append(f"Generation {md_text(r.generation)} without them serves after {r.published_after_s:.2f} s.")
    lines.append(f"Gone from disk after {r.purged_after_s:.2f} s." if r.purged_after_s is not None
                 else "Removed from disk once the retention window has passed (gc).")
    return "\n".join(lines)


@flow(name="gc", flow_run_name=gc_run_name,
      description="Operators: retire generations beyond the retention policy and remove them, and "
                  "deleted documents past their window, from disk.")
def gc(params: GcParams | None = None, settings: MabillonSettings | None = None) -> GcReport:
    settings = settings or MabillonSettings()
    params = params or GcParams()
    mask_secret_parameters()
    layout = StoreLayout.from_settings(settings)
    try:
        run_actor(settings, params.operator_token, params.operator)
    except Refusal as exc:
        return _refused("gc", exc)
    with holding_release_slot(layout, settings):
        report = collect_garbage(layout, settings.retention.keep_last,
                                 timedelta(seconds=settings.retention.deletion_window_s))
    create_markdown_artifact(key="gc", markdown=(
        f"# Garbage collection\n\nkept {md_text(', '.join(report.kept) or 'nothing')}; retired "
        f"{md_text(', '.join(report.retired) or 'nothing')}; removed {report.cache_files_removed} cache files "
        f"and {report.blobs_removed} blobs"))
    from flows.artifacts.generations import publish_generations

    publish_generations(layout, public=default_principal(settings))
    return report


def pin(layout: StoreLayout, generation: str, pinned: bool = True) -> RoutingRecord:
    from tasks.store.routing import update_routing

    with serialised_release(layout):
        routing = read_routing(layout)
        switching.check_servable(layout, generation, routing)
        names = set(routing.pinned)
        names = names | {generation} if pinned else names - {generation}
        return update_routing(layout, pinned=sorted(names))
