"""The release gate inside a `release` run: shadow the staged candidate, pause for a person, apply
the decision, leave a release record.

The pause holds no lock and no lease: the release lock and the one-slot release limit are taken
only to publish (before) and to apply the decision (after), so other operations go on while a
reviewer reads the report; and the `release` deployment has no Prefect deployment concurrency
limit (flows/serve.py), whose lease the paused run could not keep. The decision form is
`GateDecision`, its description the shadow report. A decision on a candidate whose base no longer
serves is refused with words, or rebased (tasks/ops/gate_decision.py): the run then builds again.
A run that cannot be paused for a person (no Prefect server to resume it through) refuses to
start the gate rather than wait for nobody.
"""
from __future__ import annotations

import logging
import time

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from prefect.input.run_input import keyset_from_base_key

from flows.release_records import flow_run_id, show_release_record
from flows.run_access import Refusal
from flows.settle_deletions import holding_release_slot
from schemas.generation import IngestResult
from schemas.release import GateDecision, GateTimedOut
from schemas.retrieval import AccessDenied
from schemas.settings import MabillonSettings
from tasks.ingest.crash_points import crash_point
from tasks.ops.canary import CanaryRefused
from tasks.markup import md_code, md_text
from tasks.ops.gate_decision import (DecisionRefused, GateReport, apply_decision, gate_markdown, gate_report,
                                     record_timeout)
from tasks.ops.release_record import newest_arrival
from tasks.ops.switching import GenerationUnavailable
from tasks.store.layout import StoreLayout
from tasks.store.manifests import read_manifest
from tasks.store.routing import read_routing

log = logging.getLogger(__name__)
GATE_ACTOR = "release-gate"


class GateForm(GateDecision, RunInput):
    """The decision form of a paused release (a RunInput, so the UI shows it on Resume)."""


def gate_applies(gate: bool | None, settings: MabillonSettings) -> bool:
    """Whether this release waits for a person; refuses, before any work, where nobody could
    answer (no Prefect server: the ephemeral API lives and dies with this process)."""
    gated = settings.gate.enabled if gate is None else gate
    if gated:
        from prefect.settings import PREFECT_API_URL

        if not PREFECT_API_URL.value():
            raise Refusal("a gated release waits for a person in the Prefect UI: run it through "
                          "`mabillon serve` (the release deployment) or set PREFECT_API_URL to a "
                          "running Prefect server; or release without the gate")
    return gated


@task(name="shadow", cache_policy=NONE)
def gate_report_task(settings: MabillonSettings, generation: str) -> GateReport:
    layout = StoreLayout.from_settings(settings)
    return gate_report(settings, read_manifest(layout, generation))


def _forget_answer(run_id: str | None, pause_key: str) -> None:
    """The answer may carry an access token: it is read, so it leaves the Prefect database."""
    if run_id is None:
        return
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            client.delete_flow_run_input(run_id, keyset_from_base_key(f"paused-{pause_key}")["response"])
    except Exception as exc:  # the decision stands; say that the stored answer could not be removed
        log.warning("could not delete the stored gate answer of run %s: %s", run_id, exc)


def hold_for_decision(result: IngestResult, settings: MabillonSettings,
                      timeout_s: int | None = None) -> IngestResult:
    """Shadow the staged candidate, then wait (paused, holding no lock) for approve / reject /
    canary / rebase from a person; a refused answer is shown in the form and asked again. After
    a rebase the caller builds the release again (the result's decision says "rebase")."""
    layout = StoreLayout.from_settings(settings)
    candidate = result.generation
    assert candidate is not None and result.published
    run_id = flow_run_id()
    arrival = newest_arrival(layout, candidate)
    crash_point(layout, "gate-shadow")
    report = gate_report_task(settings, candidate)
    create_markdown_artifact(key="release-gate", markdown=gate_markdown(report),
                             description=f"{candidate} waits for a decision")
    timeout_s = timeout_s or settings.gate.timeout_s
    deadline = time.monotonic() + timeout_s
    refusal, refused, attempt = None, [], 0
    while True:
        attempt += 1
        # unique in the run: Prefect answers a pause whose key already fired with its old input,
        # and a rebased candidate is asked again in the same run
        key = f"gate-{candidate}-{attempt}"
        form = GateForm.with_initial_data(description=gate_markdown(report, refusal), generation=candidate)
        try:
            answer = pause_flow_run(wait_for_input=form, timeout=max(1, int(deadline - time.monotonic())),
                                    poll_interval=settings.gate.poll_s, key=key)
        except FlowPauseTimeout:
            with holding_release_slot(layout, settings):
                before = read_routing(layout)
                decision, after = record_timeout(layout, candidate, timeout_s, GATE_ACTOR, run_id)
                path = show_release_record(layout, candidate, decision, before, after, arrival, report, refused)
            raise GateTimedOut(f"{decision.reason}; release record {path}") from None
        _forget_answer(run_id, key)
        try:
            with holding_release_slot(layout, settings):  # deletions masked during the wait settle on the outcome
                before = read_routing(layout)
                crash_point(layout, "gate-switch")
                decision, after = apply_decision(layout, settings, candidate, answer, run_id)
                path = show_release_record(layout, candidate, decision, before, after, arrival, report, refused)
        except (AccessDenied, DecisionRefused, CanaryRefused) as exc:
            refusal = str(exc)
            refused.append(f"{answer.decision}: {refusal}")
            log.warning("gate of %s: decision refused (%s); asking again", candidate, refusal)
            create_markdown_artifact(key="release-gate", markdown=gate_markdown(report, refusal),
                                     description=f"{candidate}: a decision was refused; waiting again")
            continue
        except GenerationUnavailable as exc:
            create_markdown_artifact(key="release-gate", markdown=(
                f"# Decision on {md_text(candidate)} refused\n\n{md_text(exc)}. Nothing changed: "
                f"{md_code(before.serving)} still serves."), description=f"{candidate} is gone")
            raise
        return result.model_copy(update={"serving": after.serving == candidate, "decision": decision.action,
                                         "release_record": path})
