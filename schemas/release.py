"""The release gate's contracts: the shadow report, the reviewer's decision form, the release record.

A gated release publishes its generation staged, compares it in shadow with the serving one on
a registered question set, and waits for a person; whatever happens — approval, canary,
rejection, nobody deciding in time — ends in a release record (YAML under manifests/releases/
and a Prefect markdown artifact).
"""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, SecretStr, WithJsonSchema

from schemas.generation import Canary, Counts, Quarantined, RunCounts


class ShadowQuestion(BaseModel):
    question: str
    question_id: str | None = None
    question_type: str | None = None
    gold_ids: list[str] = Field(default_factory=list)


class ShadowRow(BaseModel):
    question_id: str
    question_type: str | None = None
    staged: list[str]
    serving: list[str]
    overlap: float  # |top-k ∩ top-k| / k
    recall_staged: float | None
    recall_serving: float | None
    latency_staged_s: float
    latency_serving_s: float


class ShadowByType(BaseModel):
    question_type: str
    n: int
    recall_staged: float | None
    recall_serving: float | None
    mean_overlap: float


class ShadowReport(BaseModel):
    staged: str
    serving: str
    system: str
    k: int
    n: int
    recall_staged: float | None
    recall_serving: float | None
    mean_overlap: float
    latency_staged_median_s: float
    latency_serving_median_s: float
    latency_staged_p95_s: float
    latency_serving_p95_s: float
    rows: list[ShadowRow]
    by_type: list[ShadowByType] = Field(default_factory=list)
    questions: str | None = None  # the question set it ran on


GateAction = Literal["approve", "reject", "canary", "rebase"]


class GateTimedOut(RuntimeError):
    """Nobody decided in time; the candidate stays staged (the routing history says so)."""


class GateDecision(BaseModel):
    """What the reviewer of a paused release answers (the form in the Prefect UI)."""

    generation: str = Field(description="the candidate this release gates (as shown above); a decision "
                                        "naming another generation is refused")
    decision: GateAction = Field(description="approve: serve it to everyone · reject: retire it · "
                                             "canary: serve it to the groups below only · rebase: rebuild "
                                             "this release on the generation serving now, then decide on "
                                             "that one (when another generation was published since this "
                                             "candidate was built, approve and canary are refused: they "
                                             "would take what it published out of service)")
    reason: str = Field(min_length=3, description="why — kept in the routing history and the release record")
    canary_groups: list[str] = Field(default_factory=list,
                                     description="with canary: the groups of principals routed to the candidate")
    # one masked text box in the form (no "None" toggle, no default shown)
    access_token: Annotated[SecretStr, WithJsonSchema({"type": "string", "format": "password", "writeOnly": True})] = \
        Field(default_factory=lambda: SecretStr(""), description="your operator access token (required when "
                                                                 "principals.json names operators)")
    operator: str = Field("", description="your name, recorded when no operator tokens are configured")


class Decision(BaseModel):
    """Who decided what, when and why."""

    action: Literal["approve", "reject", "canary", "rebase", "timeout", "publish", "promote"]
    actor: str
    authenticated: bool  # actor resolved from an operator's access token, not typed or configured
    at: datetime
    reason: str = ""
    via: str  # "gate" (a paused release), "release" (ungated), "promote" (an operator's command)
    canary_groups: list[str] = Field(default_factory=list)
    flow_run_id: str | None = None


class Freshness(BaseModel):
    """From the newest source's arrival in the drop folder to being answerable."""

    newest_source: str | None
    newest_arrival_at: datetime | None
    answerable_at: datetime | None  # when the routing switch (or canary) took effect; None: not served
    seconds: float | None


class ReleaseRecord(BaseModel):
    """One per decision on a generation: the evidence a release was judged on, and the judgment."""

    generation: str
    recorded_at: datetime
    manifest: str
    manifest_sha256: str
    parent: str | None
    counts: Counts
    run: RunCounts
    digest: str  # of the generation's chunk ids, texts and vectors (reconcile)
    diff: dict[str, int]  # added / changed / removed / unchanged sources against the parent
    validation: dict
    quarantined: list[Quarantined] = Field(default_factory=list)
    shadow: ShadowReport | None = None
    shadow_note: str | None = None  # why there is no shadow report, when there is none
    decision: Decision
    # Generations that served after this one was built (its `parent` no longer serving): what
    # they published is not in it. A gate refuses approve and canary then (`refused` says so);
    # an operator's `promote` is an explicit choice and goes on, recorded here.
    published_since: list[str] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list)  # decisions refused before this one, in words
    serving_before: str | None
    serving_after: str | None
    rollback_target: str | None  # what `mabillon rollback` would serve after this decision
    canaries: list[Canary] = Field(default_factory=list)
    freshness: Freshness | None = None
