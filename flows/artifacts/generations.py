"""The generations table and the last diff, published as artifacts by every release and every
operator action, and the same words for the CLI (`mabillon generations`, `mabillon diff`)."""
from __future__ import annotations

import logging
from datetime import datetime, timezone

from schemas.generation import GenerationStatus
from schemas.retrieval import Principal
from tasks.markup import md_block
from tasks.ops.diff import GenerationDiff
from tasks.ops.disclosure import Disclosure, generation_disclosure
from tasks.store.layout import StoreLayout

log = logging.getLogger(__name__)
LISTED = 20  # ids listed per kind of change; the counts are always whole


def status_words(s: GenerationStatus) -> str:
    if s.status == "retired":
        return "retired (removed by gc)" if not s.data_kept else "retired (kept: can be promoted again)"
    return s.status + (", pinned" if s.pinned else "")


def counts_words(s: GenerationStatus) -> str:
    c = s.counts
    text = f"sources {c.sources}  chunks {c.chunks}"
    if s.counts_at_publish is not None:
        text += (f"  (published with {s.counts_at_publish.sources} sources, "
                 f"{s.counts_at_publish.chunks} chunks; {s.purged_sources} purged since)")
    return text


def generations_rows(statuses: list[GenerationStatus]) -> list[dict]:
    return [{"generation": s.generation, "status": status_words(s),
             "published": f"{s.created_at:%Y-%m-%d %H:%M}", "sources": s.counts.sources,
             "chunks": s.counts.chunks, "parent": s.parent or ""} for s in reversed(statuses)]


def diff_lines(d: GenerationDiff, listed: int = LISTED, disclosure: Disclosure | None = None) -> list[str]:
    """The diff in words: every id for the operator's CLI; for an artifact (`disclosure` given)
    the ids of public documents only, the others counted per tenant (tasks/ops/disclosure.py)."""
    s = d.sources

    def some(mark: str, ids: list[str]) -> list[str]:
        hidden = {}
        if disclosure is not None:
            ids, hidden = disclosure.split(ids)
        more = [f"  {mark} … and {len(ids) - listed} more"] if len(ids) > listed else []
        counted = [f"  {mark} {n} not public ({tenant})" for tenant, n in sorted(hidden.items())]
        return [f"  {mark} {x}" for x in ids[:listed]] + more + counted

    lines = [f"{d.a} → {d.b}",
             f"sources: {len(s.added)} added, {len(s.changed)} changed, {len(s.removed)} removed, "
             f"{len(s.unchanged)} unchanged",
             *some("+", s.added), *some("~", s.changed), *some("-", s.removed)]
    if d.purged_since:
        lines.append(f"  ({len(d.purged_since)} of the removed were deleted and purged from "
                     f"{d.a} too)")
    lines.append(f"chunks: {d.chunks[d.a]} → {d.chunks[d.b]} ({d.chunks[d.b] - d.chunks[d.a]:+d}); "
                 f"vectors: {d.vectors[d.a]} → {d.vectors[d.b]}")
    same = lambda key: getattr(d, key)[d.a] == getattr(d, key)[d.b]  # noqa: E731
    lines.append(f"model: {d.model[d.b]} (unchanged)" if same("model") and same("space_id") else
                 f"model: {d.model[d.a]} → {d.model[d.b]} (space {d.space_id[d.a]} → {d.space_id[d.b]})")
    lines.append("parsers: unchanged" if same("parsers") else f"parsers: {d.parsers[d.a]} → {d.parsers[d.b]}")
    return lines


def last_diff(layout: StoreLayout, generation: str | None) -> GenerationDiff | None:
    """`generation` against its parent, when both still have their data."""
    from tasks.ops.diff import diff_generations
    from tasks.store.lineage_store import has_lineage
    from tasks.store.manifests import read_manifest

    if generation is None:
        return None
    parent = read_manifest(layout, generation).parent
    if not parent or not has_lineage(layout, parent) or not has_lineage(layout, generation):
        return None
    return diff_generations(layout, parent, generation)


def diff_disclosure(layout: StoreLayout, diff: GenerationDiff, public: Principal | None) -> Disclosure:
    from tasks.store.tombstones import read_tombstones

    now, deleted = datetime.now(timezone.utc), read_tombstones(layout).doc_ids
    return generation_disclosure(layout, diff.a, public, now, deleted).then(
        generation_disclosure(layout, diff.b, public, now, deleted))


def diff_markdown(diff: GenerationDiff, disclosure: Disclosure) -> str:
    return "# What changed\n\n" + md_block(diff_lines(diff, disclosure=disclosure))


def publish_generations(layout: StoreLayout, generation: str | None = None,
                        public: Principal | None = None) -> None:
    """The generations table, and the diff of `generation` (default: the serving one) against
    its parent, naming only documents `public` (anyone, no token) may see; without it, none.
    Never fails the run that calls it: these are views of state already written."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from tasks.ops.generations import generation_statuses
    from tasks.store.routing import read_routing

    try:
        statuses = generation_statuses(layout)
        create_table_artifact(key="generations", table=generations_rows(statuses),
                              description="every generation of this archive, newest first")
        diff = last_diff(layout, generation or read_routing(layout).serving)
        if diff is not None:
            create_markdown_artifact(key="last-diff", description=f"what changed from {diff.a} to {diff.b}",
                                     markdown=diff_markdown(diff, diff_disclosure(layout, diff, public)))
    except Exception as exc:  # a view failing must not turn a published release into a failure
        log.warning("generations artifacts not published: %s", exc)
