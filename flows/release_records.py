"""Release records as a flow leaves them: written under the release lock (tasks/store) and shown
in the Prefect UI, for every routing change: an ungated release, an operator's promote or
canary, a deletion's generation, and each decision of the release gate (flows/release_gate.py)."""
from __future__ import annotations

from prefect.artifacts import create_markdown_artifact
from prefect.context import FlowRunContext

from schemas.release import Decision
from tasks.ops.gate_decision import GateReport
from tasks.ops.release_record import build_release_record, newest_arrival, release_record_markdown
from tasks.store.layout import StoreLayout
from tasks.store.release_records import write_release_record
from tasks.store.routing import read_routing


def flow_run_id() -> str | None:
    ctx = FlowRunContext.get()
    return str(ctx.flow_run.id) if ctx and ctx.flow_run else None


def show_release_record(layout: StoreLayout, generation: str, decision: Decision, before, after, arrival,
                        report: GateReport | None, refused: list[str] | None = None) -> str:
    """Write the release record (the caller holds the release lock) and show it in the UI."""
    record = build_release_record(layout, generation, decision, before, after, arrival,
                                  report.shadow if report else None,
                                  report.shadow_note if report else "not shadowed: no gate on this change",
                                  refused)
    path = str(write_release_record(layout, record))
    create_markdown_artifact(key="release-record", markdown=release_record_markdown(record, path),
                             description=f"release record of {generation}: {decision.action}")
    return path


def record_routing_change(layout: StoreLayout, generation: str, actor: str, reason: str,
                          action: str = "publish", via: str = "release") -> str:
    """The release record of a routing change made without a gate (an ungated release, an
    operator's `promote` or `canary`); the caller holds the release lock and has just written it."""
    after = read_routing(layout)
    event = after.history[-1]
    before = after.model_copy(update={"serving": event.from_generation,
                                      "canaries": [c for c in after.canaries if c.generation != generation]})
    decision = Decision(action=action, actor=actor, authenticated=False, at=event.at, reason=reason,
                        via=via, canary_groups=event.groups, flow_run_id=flow_run_id())
    return show_release_record(layout, generation, decision, before, after, newest_arrival(layout, generation),
                               None)
