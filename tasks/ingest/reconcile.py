"""Reconcile: counts, digests and the diff against the previous generation.

Every accepted revision has pages, every page has chunks or a recorded reason, every chunk has
a vector, no tombstoned source has chunks. Any breach is a problem that stops the release.
"""
from __future__ import annotations

import hashlib

import pyarrow as pa

from schemas.generation import Counts, ReconcileFailed, ReconcileReport, SourceDiff
from tasks.ingest.merge import Base, StagedGeneration
from tasks.task_wrapper import as_task


def generation_digest(staged: StagedGeneration) -> str:
    h = hashlib.sha256()
    order = sorted(range(staged.chunks.num_rows), key=staged.chunks["chunk_id"].to_pylist().__getitem__)
    ids = staged.chunks["chunk_id"].to_pylist()
    texts = staged.chunks["text"].to_pylist()
    for i in order:
        h.update(ids[i].encode())
        h.update(hashlib.sha256(texts[i].encode()).digest())
        # a chunk without a vector is a reconcile problem, reported, not a crash here
        h.update(staged.vectors[i].tobytes() if i < len(staged.vectors) else b"no-vector")
    return h.hexdigest()


def source_diff(staged: StagedGeneration, previous: pa.Table | None) -> SourceDiff:
    now = dict(zip(staged.sources["source_id"].to_pylist(), staged.sources["current_revision_id"].to_pylist()))
    before = {} if previous is None else dict(zip(previous["source_id"].to_pylist(),
                                                  previous["current_revision_id"].to_pylist()))
    return SourceDiff(
        added=sorted(s for s in now if s not in before),
        changed=sorted(s for s in now if s in before and before[s] != now[s]),
        removed=sorted(s for s in before if s not in now),
        unchanged=sorted(s for s in now if s in before and before[s] == now[s]),
    )


def reconcile(staged: StagedGeneration, previous_sources: pa.Table | None,
              tombstoned: set[str] = frozenset()) -> ReconcileReport:
    problems: list[str] = []
    current = staged.current_revision_ids()
    page_revs = set(staged.pages["revision_id"].to_pylist())
    without_pages = sorted(current - page_revs)
    if without_pages:
        problems.append(f"{len(without_pages)} current revisions have no pages")
    stale = page_revs - current
    if stale:
        problems.append(f"{len(stale)} pages belong to revisions that are not current")

    chunk_pages = set()
    for rev, a, b in zip(staged.chunks["revision_id"].to_pylist(), staged.chunks["page_start"].to_pylist(),
                         staged.chunks["page_end"].to_pylist()):
        chunk_pages.update((rev, p) for p in range(a, b + 1))
    unexplained, reasons = [], {}
    for pid, rev, no, reason in zip(staged.pages["page_id"].to_pylist(), staged.pages["revision_id"].to_pylist(),
                                    staged.pages["page_no"].to_pylist(), staged.pages["empty_reason"].to_pylist()):
        if (rev, no) not in chunk_pages:
            if reason:
                reasons[pid] = reason
            else:
                unexplained.append(pid)
    if unexplained:
        problems.append(f"{len(unexplained)} pages have no chunks and no recorded reason "
                        f"(e.g. {unexplained[:3]})")

    if len(staged.vectors) != staged.chunks.num_rows:
        problems.append(f"{staged.chunks.num_rows} chunks but {len(staged.vectors)} vectors")
    chunk_revs = set(staged.chunks["revision_id"].to_pylist())
    if chunk_revs - current:
        problems.append(f"chunks of {len(chunk_revs - current)} non-current revisions")
    dead = tombstoned & set(staged.chunks["doc_id"].to_pylist())
    if dead:
        problems.append(f"tombstoned documents still have chunks: {sorted(dead)[:5]}")

    counts = Counts(sources=staged.sources.num_rows, revisions=staged.revisions.num_rows,
                    pages=staged.pages.num_rows, chunks=staged.chunks.num_rows,
                    vectors=len(staged.vectors))
    return ReconcileReport(counts=counts, diff=source_diff(staged, previous_sources),
                           digest=generation_digest(staged), problems=problems,
                           revisions_without_pages=without_pages, pages_without_chunks=reasons)



def reconcile_generation(staged: StagedGeneration, base: Base) -> ReconcileReport:
    """The release's reconcile step: any problem stops the release (nothing is published)."""
    report = reconcile(staged, base.tables.sources if base.serving else None, base.tombstoned)
    if not report.ok:
        raise ReconcileFailed(report)
    return report


reconcile_task = as_task(reconcile_generation, "reconcile")
