"""Release records: generation manifests, the routing record and run reports."""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from schemas.embedding import EmbeddingSpace
from schemas.indexes import IndexContract
from schemas.lineage import ParsedDocument, Revision


class Counts(BaseModel):
    sources: int = 0
    revisions: int = 0
    pages: int = 0
    chunks: int = 0
    vectors: int = 0


class RunCounts(BaseModel):
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    quarantined: int = 0
    # how the run ran: the task runner ("local" or "dask"), how many workers it had, how many
    # pages it read by OCR (not counting pages resumed from the caches), and each stage's seconds
    runner: str = "local"
    workers: int = 1
    ocr_pages: int = 0
    stage_seconds: dict[str, float] = Field(default_factory=dict)


class Quarantined(BaseModel):
    """A refused input: recorded with its reason, never fatal for the batch."""

    uri: str
    reason: str
    digest: str | None = None
    line: int | None = None


class Screened(BaseModel):
    """What a screening stage (acquire, inspect) let through, and every input refused so far.

    Each stage takes the previous one's Screened and hands on its own, so the refusals of the
    whole run travel with the revisions instead of being added up by the flow.
    """

    kept: list[Revision] = Field(default_factory=list)
    quarantined: list[Quarantined] = Field(default_factory=list)
    # pages (PDF) or frames (images) of a kept revision, as inspection counted them; the parse
    # stage splits a long scan by page. Absent: one page, or a format without pages.
    pages: dict[str, int] = Field(default_factory=dict)


class Parsed(BaseModel):
    """The parse stage's output: each parsed revision's document, and the refusals so far."""

    documents: dict[str, ParsedDocument] = Field(default_factory=dict)  # by revision_id
    quarantined: list[Quarantined] = Field(default_factory=list)
    ocr_pages: int = 0  # pages read by OCR in this run (pages resumed from the cache not counted)


class SourceDiff(BaseModel):
    added: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)


class DiffSummary(BaseModel):
    """What a manifest keeps of the source diff: counts and a digest. The diff itself, one row
    per source, is Parquet beside the generation's lineage (`source_diff.parquet`), so a
    manifest stays a few kilobytes whatever the corpus size."""

    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    digest: str | None = None  # of the sorted (change, source_id) rows

    @model_validator(mode="before")
    @classmethod
    def _from_lists(cls, value):
        # manifests written before the diff moved to Parquet listed every source id
        if isinstance(value, dict):
            return {k: (len(v) if isinstance(v, list) else v) for k, v in value.items()}
        if isinstance(value, SourceDiff):
            return {k: len(v) for k, v in value.model_dump().items()}
        return value


class ReconcileReport(BaseModel):
    counts: Counts
    diff: SourceDiff
    digest: str  # of the generation's chunk ids, texts and vectors
    problems: list[str] = Field(default_factory=list)
    revisions_without_pages: list[str] = Field(default_factory=list)
    pages_without_chunks: dict[str, str] = Field(default_factory=dict)  # page_id → reason

    @property
    def ok(self) -> bool:
        return not self.problems


class ReconcileFailed(RuntimeError):
    """Counts or digests do not add up; nothing was published."""

    def __init__(self, report: ReconcileReport):
        self.report = report
        super().__init__("reconcile failed, nothing was published: " + "; ".join(report.problems))


class ExpectationResult(BaseModel):
    table: str
    expectation: str
    kwargs: dict
    success: bool
    unexpected_count: int | None = None
    examples: list = Field(default_factory=list)


class ValidationReport(BaseModel):
    success: bool
    results: list[ExpectationResult]

    def to_markdown(self) -> str:
        lines = ["| table | expectation | arguments | result | unexpected |", "|---|---|---|---|---|"]
        for r in self.results:
            args = ", ".join(f"{k}={v}" for k, v in r.kwargs.items())
            lines.append(
                f"| {r.table} | {r.expectation} | {args} | {'ok' if r.success else '**FAILED**'} "
                f"| {r.unexpected_count if r.unexpected_count is not None else ''} "
                f"{r.examples[:3] if r.examples else ''} |"
            )
        return "\n".join(lines)


class ValidationFailed(RuntimeError):
    def __init__(self, report: ValidationReport, report_path: str | None = None):
        self.report = report
        self.report_path = report_path
        failed = [f"{r.table}: {r.expectation}" for r in report.results if not r.success]
        super().__init__(
            "validation failed, nothing was published: " + "; ".join(failed)
            + (f" (report: {report_path})" if report_path else "")
        )


class GenerationManifest(BaseModel):
    """Immutable once written: what a generation holds and how it was made."""

    generation: str
    created_at: datetime
    parent: str | None
    embedding_space: EmbeddingSpace
    space_id: str
    # The configured model that produced the space ("minilm", "e5" or a local folder), so the
    # query side loads the matching encoder whichever generation is promoted or rolled back to.
    embedding_model: str = "minilm"
    lance_table: str
    lance_version: int
    lance_tag: str
    lineage_dir: str
    counts: Counts
    digest: str
    diff: DiffSummary
    run: RunCounts
    quarantined: list[Quarantined] = Field(default_factory=list)
    segmenter: str
    parsers: dict[str, str] = Field(default_factory=dict)
    chunking: dict = Field(default_factory=dict)
    # Inspection limits and the parser sandbox's limits this generation was parsed under.
    limits: dict = Field(default_factory=dict)
    validation: dict = Field(default_factory=dict)
    pinned: bool = False
    # Source ids removed physically after deletion (the generation's data was rewritten without them).
    purged_sources: list[str] = Field(default_factory=list)
    # How the generation is searched (None: written before the index contract; exact dense
    # search, lexical index built on first use).
    indexes: IndexContract | None = None


class PurgeRecord(BaseModel):
    """One physical purge of a published generation, kept beside its manifest (which is never
    rewritten): when, which sources were removed, and the indexes rebuilt over the rewritten rows
    with the manifest's parameters (none when the generation had no index contract)."""

    at: datetime
    sources_removed: list[str] = Field(default_factory=list)
    indexes: IndexContract | None = None


class Tombstone(BaseModel):
    doc_id: str
    at: datetime
    actor: str
    reason: str = ""
    purged_at: datetime | None = None
    # The mask holds from the moment the tombstone is written; what follows needs the release
    # slot (a generation without the document, and its purge when there is no retention window).
    # True until that is done, by the delete itself or, when a release held the slot, by that
    # release as it ends. (Absent in lists written before: settled then.)
    pending: bool = False


class TombstoneList(BaseModel):
    """Lives outside every generation and applies to whichever serves: no rollback resurrects."""

    tombstones: list[Tombstone] = Field(default_factory=list)

    @property
    def doc_ids(self) -> set[str]:
        return {t.doc_id for t in self.tombstones}

    @property
    def pending(self) -> list[Tombstone]:
        return [t for t in self.tombstones if t.pending]


# Events that change which generation serves everyone; the others (canary, gate) leave it be.
SWITCH_ACTIONS = ("publish", "promote", "rollback")


class RoutingEvent(BaseModel):
    at: datetime
    actor: str
    # canary / canary-end: a candidate routed to some groups, or no longer; reject: a gated
    # candidate retired by its reviewer; rebase: a gated candidate retired because another
    # generation served since it was built, rebuilt on that one by the same run; gate-timeout:
    # nobody decided, the candidate stays staged.
    action: Literal["publish", "promote", "rollback", "canary", "canary-end", "reject", "rebase",
                    "gate-timeout"]
    from_generation: str | None
    to_generation: str  # the generation the event is about (the new serving one for a switch)
    reason: str = ""
    groups: list[str] = Field(default_factory=list)  # canary events: who is routed
    flow_run_id: str | None = None  # the Prefect run that decided, when one did


class Canary(BaseModel):
    """Principals holding any of `groups` are served `generation` instead of the serving one."""

    generation: str
    space_id: str
    groups: list[str]
    since: datetime
    actor: str
    reason: str = ""


class Route(BaseModel):
    """Which generation answers a principal, and why: everyone's (serving) or a canary's."""

    generation: str
    route: Literal["serving", "canary", "requested"]


class RoutingRecord(BaseModel):
    """Which generation serves, canaries to named groups, and every event that led there.
    One file, replaced atomically under the release lock."""

    serving: str | None = None
    space_id: str | None = None
    history: list[RoutingEvent] = Field(default_factory=list)
    retired: list[str] = Field(default_factory=list)
    pinned: list[str] = Field(default_factory=list)
    canaries: list[Canary] = Field(default_factory=list)

    def route_for(self, groups: list[str]) -> Route | None:
        """The canary whose groups the principal holds (a group is in one canary at most), else
        the serving generation; None when nothing serves and no canary applies."""
        held = set(groups)
        for canary in self.canaries:
            if held & set(canary.groups):
                return Route(generation=canary.generation, route="canary")
        return Route(generation=self.serving, route="serving") if self.serving else None


class GenerationStatus(BaseModel):
    """One line of `mabillon generations`. `status`: serving; staged (published, never served);
    retired (served before and replaced, or removed by gc: see `data_kept`)."""

    generation: str
    status: Literal["serving", "canary", "staged", "retired"]
    created_at: datetime
    counts: Counts  # what the generation holds now (after any purge of deleted documents)
    parent: str | None = None
    served: bool = False  # has served at some point
    data_kept: bool = True  # False once gc removed its data: it can no longer be served
    pinned: bool = False
    purged_sources: int = 0  # sources physically removed after publication (deletions)
    counts_at_publish: Counts | None = None  # set when a purge changed the counts


class IngestResult(BaseModel):
    generation: str | None
    serving: bool
    counts: Counts
    run: RunCounts
    quarantined: list[Quarantined]
    manifest: str | None
    published: bool = False
    # A gated release: the reviewer's decision (approve, reject, canary) and its release record.
    decision: str | None = None
    release_record: str | None = None
