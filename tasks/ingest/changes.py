"""Changes: which accepted revisions are new, changed or unchanged against the serving generation."""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from schemas.generation import Quarantined, Screened
from schemas.lineage import Revision
from tasks.ingest.merge import Base
from tasks.task_wrapper import as_task

# What a sidecar or an export says about a document besides its bytes. Same bytes described
# differently (an embargo added, groups narrowed) must reach the served chunks, so such a
# revision is reprocessed (parse and vectors come from the caches, by revision).
DESCRIPTION_FIELDS = ("corpus", "date", "title", "tenant", "groups", "valid_from", "valid_to",
                      "metadata_json")


def described_differently(new: Revision, old: Revision) -> bool:
    return any(getattr(new, f) != getattr(old, f) for f in DESCRIPTION_FIELDS)


@dataclass
class ChangeSet:
    """The run's revisions sorted against the serving generation: what to parse, chunk and embed."""

    added: list[Revision] = field(default_factory=list)
    changed: list[Revision] = field(default_factory=list)
    unchanged: list[Revision] = field(default_factory=list)
    # current revisions of the serving generation that must be redone (another embedding space)
    carried_reprocess: list[Revision] = field(default_factory=list)
    quarantined: list[Quarantined] = field(default_factory=list)  # refused so far in this run
    pages: dict[str, int] = field(default_factory=dict)  # page counts of paged revisions

    @property
    def to_process(self) -> list[Revision]:
        return [*self.added, *self.changed, *self.carried_reprocess]

    @property
    def changes_anything(self) -> bool:
        return bool(self.added or self.changed or self.carried_reprocess)


def classify(accepted: list[Revision], base_sources: pa.Table, base_revisions: list[Revision],
             base_space_id: str | None, space_id: str) -> ChangeSet:
    current = dict(zip(base_sources["source_id"].to_pylist(), base_sources["current_revision_id"].to_pylist()))
    described = {r.revision_id: r for r in base_revisions}
    changes = ChangeSet()
    for rev in accepted:
        if rev.source_id not in current:
            changes.added.append(rev)
        elif current[rev.source_id] != rev.revision_id:
            changes.changed.append(rev)
        elif rev.revision_id in described and described_differently(rev, described[rev.revision_id]):
            changes.changed.append(rev)
        else:
            changes.unchanged.append(rev)
    if base_space_id is not None and base_space_id != space_id:
        touched = {r.source_id for r in changes.to_process}
        changes.carried_reprocess = [r for r in base_revisions if r.source_id not in touched]
    return changes


def sort_changes(screened: Screened, base: Base) -> ChangeSet:
    """The run's work: what to parse, chunk and embed, with the refusals and page counts so far."""
    changes = classify(screened.kept, base.tables.sources, base.current_revisions(), base.space_id,
                       base.space.space_id)
    changes.quarantined = list(screened.quarantined)
    changes.pages = dict(screened.pages)
    return changes


sort_changes_task = as_task(sort_changes, "plan")  # "plan": the stage's recorded name
