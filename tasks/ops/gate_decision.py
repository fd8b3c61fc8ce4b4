"""The release gate as plain functions: the report a reviewer reads, and the reviewer's decision
applied to the routing record. The Prefect pause that waits for the decision is in flows/release_gate.py.

A decision changes the routing record in one atomic rename under the release lock (the caller
holds it), after every check has passed: a refused decision changes nothing.

A decision names the base it was made on: the candidate's parent, what served when it was built.
When another generation has been published since (an ungated ingest, a delete, a promote while
the gate waited), serving the candidate would take what that one brought out of service, so
approve and canary are refused with words, and `rebase` retires the candidate for the same run
to build again on what serves now (flows/release.py); reject is always open.
"""
from __future__ import annotations

import logging
from datetime import datetime, timezone

from pydantic import BaseModel, Field

from schemas.generation import Counts, GenerationManifest, Quarantined, RoutingRecord
from schemas.release import Decision, GateDecision, ShadowReport
from schemas.retrieval import AccessDenied
from schemas.settings import MabillonSettings
from tasks.access.principals import list_principals, require_operator, resolve_principal, resolve_token
from tasks.ops import canary, switching
from tasks.markup import md_code, md_text
from tasks.ops.disclosure import quarantine_markdown
from tasks.ops.release_record import shadow_markdown
from tasks.ops.retention import remove_generation_data
from tasks.ops.shadow import load_shadow_questions, shadow_compare
from tasks.store.layout import StoreLayout
from tasks.store.manifests import read_manifest
from tasks.store.routing import read_routing, record_event

log = logging.getLogger(__name__)


class DecisionRefused(ValueError):
    """The decision cannot be applied as given; nothing changed, the reviewer may decide again."""


class GateReport(BaseModel):
    """What the reviewer of a paused release sees in the form."""

    generation: str
    serving: str | None
    base: str | None = None  # what the candidate was built on (its parent)
    counts: Counts
    diff: dict[str, int]
    quarantined: list[Quarantined] = Field(default_factory=list)
    validation: dict = Field(default_factory=dict)
    shadow: ShadowReport | None = None
    shadow_note: str | None = None


def gate_report(settings: MabillonSettings, manifest: GenerationManifest) -> GateReport:
    """Shadow the candidate against the serving generation on the registered question set."""
    layout = StoreLayout.from_settings(settings)
    serving = read_routing(layout).serving
    report = GateReport(generation=manifest.generation, serving=serving, base=manifest.parent,
                        counts=manifest.counts,
                        diff={k: v for k, v in manifest.diff.model_dump().items() if isinstance(v, int)},
                        quarantined=manifest.quarantined, validation=manifest.validation)
    questions = settings.gate.questions
    if serving is None:
        report.shadow_note = "nothing serves yet, so there is nothing to compare with"
    elif questions is None or not questions.exists():
        report.shadow_note = (f"no registered question set (MABILLON_GATE__QUESTIONS: {questions})")
    else:
        principal = resolve_principal(settings, settings.gate.principal)
        shadow = shadow_compare(settings, principal, manifest.generation, load_shadow_questions(questions),
                                system=settings.gate.system, k=settings.gate.k)
        report.shadow = shadow.model_copy(update={"questions": str(questions)})
    return report


def gate_markdown(report: GateReport, refusal: str | None = None) -> str:
    """The form's description (Prefect renders it as markdown above the fields): the figures a
    reviewer decides on come first."""
    d = report.diff
    lines = [*([f"> **Refused: {md_text(refusal)}** Nothing changed; decide again.", ""] if refusal else []),
             f"## Release {md_code(report.generation)} waits for a decision", "",
             f"Candidate {md_code(report.generation)} (built on {md_code(report.base or '—')}) against serving "
             f"{md_code(report.serving or '—')}. Answer with the generation, a decision (approve, reject, "
             "canary with groups, or rebase) and a reason. Should another generation be published "
             "while this waits, approve and canary are refused (they would take what it brought out "
             "of service): rebase builds this release again on it, and you decide on that one.", "",
             "### Shadow report", "", *shadow_markdown(report.shadow, report.shadow_note), "",
             "### Counts and diff", "",
             md_text(", ".join(f"{k} {v}" for k, v in report.counts.model_dump().items())) + ".",
             f"Sources against the serving generation: added {d.get('added', 0)}, changed "
             f"{d.get('changed', 0)}, removed {d.get('removed', 0)}, unchanged {d.get('unchanged', 0)}.",
             f"Validation: {'passed' if report.validation.get('success') else 'FAILED'} "
             f"({md_text(report.validation.get('expectations', '?'))} expectations)."]
    lines += quarantine_markdown(report.quarantined)
    if report.shadow and report.shadow.questions:
        lines += ["", f"Questions: {md_code(report.shadow.questions)}."]
    return "\n".join(lines)


def authenticate(settings: MabillonSettings, decision: GateDecision) -> tuple[str, bool]:
    """(who decided, whether that is proven). With operators in principals.json a decision needs
    one's access token; without any, the typed name (or the configured actor) is recorded as such."""
    token = decision.access_token.get_secret_value()
    if token.strip():
        return require_operator(resolve_token(settings, token)).principal_id, True
    if any(p.is_operator for p in list_principals(settings)):
        raise AccessDenied("this decision needs an operator's access token")
    return (decision.operator.strip() or settings.actor), False


def apply_decision(layout: StoreLayout, settings: MabillonSettings, candidate: str,
                   decision: GateDecision, flow_run_id: str | None = None) -> tuple[Decision, RoutingRecord]:
    """Approve (promote), reject (retire), canary, or rebase (retire, for the run to build again on
    what serves now) the candidate; the caller holds the release lock. Raises AccessDenied,
    DecisionRefused (approve or canary of a candidate whose base no longer serves, among others),
    CanaryRefused or GenerationUnavailable — each before anything is written."""
    actor, proven = authenticate(settings, decision)
    if decision.generation.strip() != candidate:
        raise DecisionRefused(f"this release gates {candidate}, not {decision.generation.strip()!r}")
    reason = decision.reason.strip()
    if len(reason) < 3:
        raise DecisionRefused("give a reason (at least three characters)")
    routing = read_routing(layout)
    switching.check_servable(layout, candidate, routing)  # vanished meanwhile (gc, retired)?
    since = stale_base(layout, candidate, routing, decision.decision)
    now = datetime.now(timezone.utc)
    made = Decision(action=decision.decision, actor=actor, authenticated=proven, at=now, reason=reason,
                    via="gate", flow_run_id=flow_run_id)
    if decision.decision == "approve":
        routing = switching.promote(layout, candidate, actor, f"gate approval: {reason}", flow_run_id)
    elif decision.decision == "canary":
        if not decision.canary_groups:
            raise DecisionRefused("a canary needs at least one group (canary_groups)")
        routing = canary.start(layout, settings, candidate, decision.canary_groups, actor, reason, flow_run_id)
        made.canary_groups = routing.canaries[-1].groups
    else:  # reject, or rebase: retired either way (a rebase is built again by the run)
        # data first: a crash in between leaves a staged generation without data, which
        # `promote` refuses; the routing record (what serves) is untouched either way
        remove_generation_data(layout, candidate)
        if decision.decision == "rebase":
            reason = f"{switching.since_words(candidate, base_of(layout, candidate), since)}; rebuilt on " \
                     f"{routing.serving}: {reason}"
        routing = record_event(layout, decision.decision, candidate, actor, reason, retire=True,
                               flow_run_id=flow_run_id)
    event = routing.history[-1]
    made.at = event.at
    log.info("gate of %s: %s by %s", candidate, decision.decision, actor)
    return made, routing


def base_of(layout: StoreLayout, generation: str) -> str | None:
    return read_manifest(layout, generation).parent


def stale_base(layout: StoreLayout, candidate: str, routing: RoutingRecord, action: str) -> list[str]:
    """The generations published since the candidate was built; refuses the decisions that would
    take what they brought out of service (approve, canary), and a rebase with nothing to rebase on."""
    since = switching.published_since(layout, candidate, routing)
    if since and action in ("approve", "canary"):
        serve = "approving it would take that out of service" if action == "approve" else \
                "a canary would hide it from those groups"
        raise DecisionRefused(f"{switching.since_words(candidate, base_of(layout, candidate), since)}; "
                              f"{serve}. Decide rebase to build this release again on {routing.serving} "
                              "(nothing published since is lost) and approve the rebased candidate, "
                              "or reject")
    if not since and action == "rebase":
        now = (f"{candidate} already serves" if routing.serving == candidate else
               f"{candidate} was built on {routing.serving or 'an empty home'}, which still serves")
        raise DecisionRefused(f"{now}: nothing to rebase on; approve, reject or canary")
    return since


def record_timeout(layout: StoreLayout, candidate: str, waited_s: float, actor: str,
                   flow_run_id: str | None = None) -> tuple[Decision, RoutingRecord]:
    """Nobody decided in time: the candidate stays staged, and the routing history says so."""
    reason = (f"no decision within {waited_s:.0f} s; {candidate} stays staged "
              f"(promote it with `mabillon promote {candidate}`, or release again)")
    routing = record_event(layout, "gate-timeout", candidate, actor, reason, flow_run_id=flow_run_id)
    return Decision(action="timeout", actor=actor, authenticated=False, at=routing.history[-1].at,
                    reason=reason, via="gate", flow_run_id=flow_run_id), routing
