"""The release record: what a generation was judged on and how it was judged, as one document.

Built from the generation's immutable manifest (counts, validation, reconcile digest and diff,
quarantined inputs), the shadow report the reviewer saw, the decision, the routing before and
after it, and the freshness measured for the release.
"""
from __future__ import annotations

from datetime import datetime, timezone

import pyarrow.compute as pc

from schemas.generation import RoutingRecord
from schemas.release import Decision, Freshness, ReleaseRecord, ShadowReport
from tasks.markup import md_code, md_row, md_text
from tasks.ops.disclosure import quarantine_markdown
from tasks.ops.switching import previously_serving, published_since
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import has_lineage, read_lineage_table
from tasks.store.manifests import read_manifest
from tasks.store.release_records import manifest_sha256

SERVED = ("approve", "publish", "promote", "canary")  # decisions after which it answers someone


def newest_arrival(layout: StoreLayout, generation: str) -> tuple[str | None, datetime | None]:
    """The newest current source of a generation and when it reached the drop folder."""
    if not has_lineage(layout, generation):
        return None, None
    revs = read_lineage_table(layout, generation, "revisions", ["uri", "arrived_at", "is_current"])
    revs = revs.filter(pc.and_(revs["is_current"], pc.is_valid(revs["arrived_at"])))
    if revs.num_rows == 0:
        return None, None
    i = int(pc.index(revs["arrived_at"], pc.max(revs["arrived_at"])).as_py())
    return revs["uri"][i].as_py(), revs["arrived_at"][i].as_py()


def freshness(arrival: tuple[str | None, datetime | None], decision: Decision,
              after: RoutingRecord) -> Freshness:
    uri, arrived = arrival
    answerable = None
    if decision.action == "canary":
        answerable = next((c.since for c in after.canaries if set(c.groups) == set(decision.canary_groups)),
                          decision.at)
    elif decision.action in SERVED:
        answerable = decision.at
    seconds = (answerable - arrived).total_seconds() if answerable and arrived else None
    return Freshness(newest_source=uri, newest_arrival_at=arrived, answerable_at=answerable,
                     seconds=seconds)


def build_release_record(layout: StoreLayout, generation: str, decision: Decision, before: RoutingRecord,
                 after: RoutingRecord, arrival: tuple[str | None, datetime | None],
                 shadow: ShadowReport | None = None, shadow_note: str | None = None,
                 refused: list[str] | None = None) -> ReleaseRecord:
    m = read_manifest(layout, generation)
    return ReleaseRecord(
        generation=generation, recorded_at=datetime.now(timezone.utc),
        manifest=str(layout.manifest_path(generation)), manifest_sha256=manifest_sha256(layout, generation),
        parent=m.parent, counts=m.counts, run=m.run, digest=m.digest,
        diff={k: v for k, v in m.diff.model_dump().items() if isinstance(v, int)},
        validation={**m.validation, "report": str(layout.reports / f"{generation}-validation.md")},
        quarantined=m.quarantined, shadow=shadow, shadow_note=shadow_note, decision=decision,
        published_since=published_since(layout, generation, before), refused=refused or [],
        serving_before=before.serving, serving_after=after.serving,
        rollback_target=previously_serving(after) if after.serving else None,
        canaries=after.canaries, freshness=freshness(arrival, decision, after))


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def shadow_markdown(shadow: ShadowReport | None, note: str | None = None) -> list[str]:
    if shadow is None:
        return [f"No shadow comparison: {md_text(note or 'none was run')}."]
    s = shadow
    lines = ["| question type | n | recall@k candidate | recall@k serving | top-k overlap |",
             "|---|---|---|---|---|",
             *(md_row([t.question_type, t.n, _pct(t.recall_staged), _pct(t.recall_serving),
                       f"{t.mean_overlap:.2f}"]) for t in s.by_type),
             f"| **all** | {s.n} | {_pct(s.recall_staged)} | {_pct(s.recall_serving)} | {s.mean_overlap:.2f} |",
             "", f"{s.n} questions, {md_text(s.system)}, k={s.k}: candidate {md_code(s.staged)} vs serving "
             f"{md_code(s.serving)}. "
             f"Latency, median (p95): candidate {s.latency_staged_median_s * 1000:.1f} ms "
             f"({s.latency_staged_p95_s * 1000:.1f} ms), serving {s.latency_serving_median_s * 1000:.1f} ms "
             f"({s.latency_serving_p95_s * 1000:.1f} ms)."]
    return lines


def release_record_markdown(r: ReleaseRecord, path: str | None = None) -> str:
    """The record as every UI user reads it: what the files hold, without the source names (the
    newest source is not named: its name is a document id, see tasks/ops/disclosure.py)."""
    d, f = r.decision, r.freshness
    who = f"{md_text(d.actor)}{'' if d.authenticated else ' (not authenticated)'}"
    lines = [f"# Release record: {md_text(r.generation)} — {md_text(d.action)}", "",
             f"- decision: **{md_text(d.action)}** by {who} at {d.at:%Y-%m-%d %H:%M:%S} UTC via "
             f"{md_text(d.via)}: {md_text(d.reason or '—')}"
             + (f" (groups {md_text(', '.join(d.canary_groups))})" if d.canary_groups else ""),
             f"- serving: {md_text(r.serving_before or '—')} → {md_text(r.serving_after or '—')}; "
             f"rollback target: {md_text(r.rollback_target or '—')}",
             *([f"- **published since {md_text(r.generation)} was built on {md_text(r.parent or '—')}: "
                f"{md_text(', '.join(r.published_since))}** — what they brought is not in {md_text(r.generation)}"]
               if r.published_since else []),
             *(f"- refused before: {md_text(words)}" for words in r.refused),
             *(["- canaries: " + "; ".join(f"{md_text(c.generation)} → {md_text(', '.join(c.groups))}"
                                           for c in r.canaries)] if r.canaries else []),
             f"- manifest: {md_code(r.manifest)} (sha256 {md_code(r.manifest_sha256[:16] + '…')}), "
             f"parent {md_text(r.parent or '—')}",
             f"- validation: {'passed' if r.validation.get('success') else 'FAILED'} "
             f"({md_text(r.validation.get('expectations', '?'))} expectations, "
             f"{md_code(r.validation.get('report'))})",
             f"- reconcile: digest {md_code(r.digest[:16] + '…')}; "
             + md_text(", ".join(f"{k} {v}" for k, v in r.counts.model_dump().items())),
             "- sources against the parent: " + md_text(", ".join(f"{k} {v}" for k, v in r.diff.items())),
             "- this run: " + md_text(", ".join(f"{k} {v}" for k, v in r.run.model_dump().items()
                                                if isinstance(v, (int, float, str)))),
             "- freshness: " + (f"{f.seconds:.1f} s from the arrival of the newest source "
                                f"({f.newest_arrival_at:%Y-%m-%d %H:%M:%S}) to answerable "
                                f"({f.answerable_at:%Y-%m-%d %H:%M:%S})" if f and f.seconds is not None
                                else "not answerable after this decision" if f and f.answerable_at is None
                                else "arrival time unknown"),
             *([f"- record: {md_code(path)}"] if path else []),
             "", "## Shadow", "", *shadow_markdown(r.shadow, r.shadow_note)]
    lines += quarantine_markdown(r.quarantined)
    return "\n".join(lines)
