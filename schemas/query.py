"""Query contracts: the TRACE loop's questions, plans, steps, verdicts, memory, briefings,
evidence packages and query records — and one model per LLM purpose.

Each purpose (plan, search, review, held_review, briefing, replan, rerank) has two models: the
*context* the loop renders its prompt from (what a policy decides on) and the *output* the model
must return. The JSON Schema sent to a model is derived from the output model
(`output_schema`), and a reply is validated by that same model, so the two cannot drift.
"""
from __future__ import annotations

import functools
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.retrieval import Hit, Principal

RATIONALE_MAX = 120  # characters: the agent's accept rationale must fit a citation line

Decision = Literal["accept", "reject", "hold"]
SearchTool = Literal["bm25", "dense", "date_range", "substring"]
IsoDate = Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]
Rationale = Annotated[str, Field(max_length=RATIONALE_MAX)]


class LoopParams(BaseModel):
    """Knobs of one TRACE run; recorded verbatim in the query record."""

    max_sub_questions: int = Field(default=4, ge=1)  # M: the planner and replanner cap
    step_budget: int = Field(default=6, ge=1)  # effective steps per sub-question
    max_raw_steps: int = Field(default=16, ge=2)  # hard stop, skipped steps included
    warm_k: int = 30  # documents per warm start
    review_k: int = 6  # chunks put in front of the agent per review
    search_k: int = 10  # hits asked of a channel per search
    snippet_chars: int = 700  # chunk text shown per hit in prompts
    history_actions: int = 8  # last actions carried in the prompt
    max_retries: int = 2  # re-asks after an invalid output, the error fed back
    date_widen_days: int = 1
    replan: bool = True
    final_k: int = 20  # documents in the package
    backfill: bool = True  # fill below the accepted set with the warm-start order
    question_weight: float = 1.0  # weight of the whole question's warm start in that order
    too_few: int = 2  # fewer accepted documents than this raises the too_few_results flag


class Question(BaseModel):
    # a question file may number its questions (`"question_id": 7`): the id is their text
    model_config = ConfigDict(coerce_numbers_to_str=True)

    question: str
    question_id: str | None = None


class SubQuestion(BaseModel):
    text: str
    target_corpus: str | None = None  # one sub-corpus, or None for all the principal may read
    entities: list[str] = Field(default_factory=list)  # surface forms as written in the question
    dates: list[str] = Field(default_factory=list)  # ISO dates the sub-question is about
    origin: Literal["planner", "replanner"] = "planner"


class Memory(BaseModel):
    """The agent's five-slot working memory; each step replaces it whole (every slot given)."""

    model_config = ConfigDict(extra="forbid")

    prior_findings: str
    question_analysis: str
    evidence_gathered: str
    gaps_remaining: str
    next_steps: str

    @classmethod
    def empty(cls) -> "Memory":
        return cls(**{k: "" for k in cls.model_fields})


class Verdict(BaseModel):
    chunk_id: str
    doc_id: str
    decision: Decision
    rationale: str = Field(default="", max_length=RATIONALE_MAX)
    sub_question: int
    step: int
    # who decided: the agent's review, the silent date widening, or held re-evaluation
    by: Literal["agent", "widening", "held_review", "auto"] = "agent"
    probability: float | None = None  # the learned judge's P(document is gold), when it decided


class BriefedDocument(BaseModel):
    """An accepted document as later steps see it: where and when, not its text."""

    doc_id: str
    corpus: str | None
    date: str | None


class RankedDocument(BriefedDocument):
    rank: int  # 1-based


# ---- outputs: what a model (or an offline policy) must return, one model per purpose ------

class PlannedSubQuestion(BaseModel):
    text: str = Field(min_length=1)
    target_corpus: str | None
    entities: list[str]
    dates: list[IsoDate] = Field(default_factory=list)


class PlanOutput(BaseModel):
    sub_questions: list[PlannedSubQuestion] = Field(min_length=1)


class SearchArgs(BaseModel):
    """Arguments of a search; which of them each tool needs is checked by the tool."""

    query: str | None = None
    text: str | None = None
    corpus: str | None = None
    date_from: IsoDate | None = None
    date_to: IsoDate | None = None


class SearchStep(BaseModel):
    thought: str
    action: Literal["bm25", "dense", "date_range", "substring", "finish"]
    args: SearchArgs
    memory_update: Memory


class VerdictItem(BaseModel):
    chunk_id: str
    verdict: Decision
    rationale: Rationale
    # optional: the reviewer's probability that the passage's document is evidence for the
    # question (the learned judge always gives it; it orders ties in the merge)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)


class ReviewArgs(BaseModel):
    verdicts: list[VerdictItem]


class ReviewStep(BaseModel):
    thought: str
    action: Literal["review"]
    args: ReviewArgs
    memory_update: Memory


class HeldDecision(BaseModel):
    chunk_id: str
    decision: Literal["promote", "reject", "keep"]
    rationale: Rationale
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)  # as in VerdictItem


class HeldReview(BaseModel):
    decisions: list[HeldDecision]


class BriefingOutput(BaseModel):
    summary: str
    confirmed_facts: list[str]
    dates: list[IsoDate]
    entities: list[str]
    gaps: list[str]
    search_hints: list[str]


class Briefing(BriefingOutput):
    """What one sub-question hands to the next: the only channel between them."""

    # stamped by the loop, not written by the model: the accepted documents behind the facts
    documents: list[BriefedDocument] = Field(default_factory=list)

    @classmethod
    def failed(cls, error: str, documents: list[BriefedDocument]) -> "Briefing":
        return cls(summary="briefing failed", confirmed_facts=[], dates=[], entities=[],
                   gaps=[error], search_hints=[], documents=documents)


class ReplanOutput(BaseModel):
    # the sub-questions still to run, revised; may add some (the loop enforces the cap)
    sub_questions: list[PlannedSubQuestion]
    reason: str


class RerankOutput(BaseModel):
    order: list[str] = Field(min_length=1)


# ---- contexts: the typed state each call's prompt is rendered from --------------------------

class SearchRecord(BaseModel):
    tool: str
    args: dict[str, Any]


class PlanContext(BaseModel):
    question: str
    corpora: list[str]
    max_sub_questions: int


class StepContext(BaseModel):
    """What one agent step decides on."""

    question: str
    sub_question: SubQuestion
    briefings: list[Briefing]
    searches: list[SearchRecord]
    accepted: list[BriefedDocument]  # by this sub-question
    # by the sub-questions before it (the other sub-corpus's documents, for date fit)
    accepted_before: list[BriefedDocument] = Field(default_factory=list)
    # the whole question's warm start, documents only (where and when): what a passage's
    # document could pair with in another sub-corpus
    question_candidates: list[RankedDocument] = Field(default_factory=list)
    budget_left: int
    corpora: list[str]
    memory: Memory


class ReviewContext(StepContext):
    hits: list[Hit]


class HeldContext(StepContext):
    held: list[Hit]


class BriefingContext(BaseModel):
    question: str
    sub_question: SubQuestion
    accepted: list[Hit]
    memory: Memory


class DoneSubQuestion(SubQuestion):
    accepted: int


class ReplanContext(BaseModel):
    question: str
    done: list[DoneSubQuestion]
    remaining: list[SubQuestion]
    briefings: list[Briefing]
    max_sub_questions: int
    corpora: list[str]


class RerankCandidate(BaseModel):
    doc_id: str
    corpus: str | None
    date: str | None
    rationales: list[str]
    sub_questions: list[int]
    positions: list[int]
    fused: int | None
    support: float
    probability: float | None = None  # the learned judge's best P(gold) for the document


class RerankContext(BaseModel):
    question: str
    candidates: list[RerankCandidate]  # the tie to order
    accepted: list[BriefedDocument]  # every accepted document of the question


class Purpose(BaseModel):
    """One kind of LLM call: the context it is rendered from and the output it must return."""

    name: str
    context: type[BaseModel]
    output: type[BaseModel]


PURPOSES: dict[str, Purpose] = {p.name: p for p in (
    Purpose(name="plan", context=PlanContext, output=PlanOutput),
    Purpose(name="search", context=StepContext, output=SearchStep),
    Purpose(name="review", context=ReviewContext, output=ReviewStep),
    Purpose(name="held_review", context=HeldContext, output=HeldReview),
    Purpose(name="briefing", context=BriefingContext, output=BriefingOutput),
    Purpose(name="replan", context=ReplanContext, output=ReplanOutput),
    Purpose(name="rerank", context=RerankContext, output=RerankOutput),
)}


@functools.lru_cache(maxsize=None)
def output_schema(output: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema sent to a model, derived from the output model (never written beside it)."""
    return output.model_json_schema()


def output_schemas(purposes: dict[str, Purpose]) -> dict[str, dict[str, Any]]:
    """Each purpose's schema, derived from its output model: a field added to a model is in
    the schema sent from then on, with nothing to edit beside it."""
    return {name: output_schema(p.output) for name, p in purposes.items()}


OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = output_schemas(PURPOSES)


# ---- records ----------------------------------------------------------------------------------

class ChannelResult(BaseModel):
    """What one search returned, as recorded (ids and scores; texts live in the generation)."""

    tool: str
    args: dict[str, Any]
    hits: list[dict[str, Any]]  # {chunk_id, doc_id, rank, score, corpus, date, widened}
    shown: list[str]  # chunk ids put in front of the agent
    held_silently: list[str] = Field(default_factory=list)


class AgentStep(BaseModel):
    sub_question: int
    index: int  # raw step number within the sub-question
    kind: Literal["search", "review", "finish", "skipped", "terminated"]
    purpose: Literal["search", "review"] | None = None  # which call produced it
    effective: bool
    prompt_digest: str | None = None
    raw_output: str | None = None
    raw_attempts: list[str] = Field(default_factory=list)  # re-asks included, for replay
    output: dict[str, Any] | None = None  # the validated output, as JSON
    feedback: str | None = None
    channel: ChannelResult | None = None
    verdicts: list[Verdict] = Field(default_factory=list)
    memory: Memory = Field(default_factory=Memory.empty)
    model_s: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    attempts: int = 0


class LlmCallRecord(BaseModel):
    """One provider call outside the agent's steps (plan, held review, briefing, replan, rerank)."""

    purpose: str
    sub_question: int | None = None
    prompt_digest: str
    raw_output: str
    raw_attempts: list[str] = Field(default_factory=list)
    output: dict[str, Any] | None
    error: str | None = None
    model_s: float
    tokens_in: int
    tokens_out: int
    attempts: int


class JudgeInfo(BaseModel):
    """Which learned judge decided (or why it could not): recorded with every answer."""

    policy: str  # "learned", or "rules" when the learned judge could not be loaded
    model_file: str
    digest: str | None  # sha256 of the model file's bytes; None when it could not be read
    version: str | None = None
    fallback: str | None = None  # why the rules decided instead (missing or corrupt file)


class EvidenceSpan(BaseModel):
    chunk_id: str
    page: int | None
    bbox: list[float] | None
    char_start: int
    char_end: int
    text: str
    # the OCR's confidence (0–1) on the cited page as delivered (ALTO WC), when it was recorded
    ocr_confidence: float | None = None


class StageRanks(BaseModel):
    bm25: int | None = None
    dense: int | None = None
    temporal: int | None = None
    fused: int | None = None
    final: int | None = None


class EvidenceDocument(BaseModel):
    doc_id: str
    rank: int
    corpus: str | None
    date: str | None
    revision: str | None
    digest: str | None
    source_id: str | None = None
    status: Literal["accepted", "held", "retrieved"]
    confirmations: int
    sub_questions: list[int] = Field(default_factory=list)
    rationales: list[str] = Field(default_factory=list)
    ranks: StageRanks = Field(default_factory=StageRanks)
    evidence: list[EvidenceSpan] = Field(default_factory=list)
    title: str | None = None
    # OCR quality of the whole document as delivered (an article's ALTO word confidence);
    # shown to the reader, not used for ranking (not yet measured on the development questions)
    ocr_confidence: float | None = None


class Cost(BaseModel):
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    model_s: float = 0.0
    framework_s: float = 0.0  # total minus model: retrieval and the loop's own work
    retrieval_s: float = 0.0  # of which in retrieval channels (query embedding included)
    retrieval_calls: int = 0
    total_s: float = 0.0


class EvidencePackage(BaseModel):
    question: str
    question_id: str | None = None
    generation: str
    space_id: str
    provider: str  # which provider decided
    model: str | None = None
    documents: list[EvidenceDocument]
    accepted: list[str]  # doc ids, in final order
    held: list[str]  # doc ids held and never promoted
    rejected: list[str]  # chunk ids rejected
    rejected_docs: list[str]  # docs with a rejected chunk and no accepted one
    retrieved: list[str]  # every doc id any channel showed the loop
    plan: list[SubQuestion]
    briefings: list[Briefing]
    flags: list[str]
    cost: Cost
    judge: JudgeInfo | None = None
    record: str | None = None
    query_id: str | None = None  # the query record's id: the reading room's /queries/<query_id>
    # How the generation was chosen: serving (everyone's), canary (a candidate routed to one of
    # the principal's groups) or requested (named by the caller); and the query time, when the
    # question named one (None: the time of each search).
    route: str | None = None
    as_of: datetime | None = None


class QueryRecord(BaseModel):
    """Everything needed to audit or replay one answer; one JSON document per question."""

    query_id: str
    created_at: str
    question: Question
    principal: Principal | None
    generation: str
    space_id: str
    provider: str
    model: str | None
    judge: JudgeInfo | None = None
    params: LoopParams
    plan_calls: list[LlmCallRecord]
    sub_questions: list[SubQuestion]
    warm_starts: list[ChannelResult]
    steps: list[AgentStep]
    calls: list[LlmCallRecord]  # held review, briefing, replan, rerank
    briefings: list[Briefing]
    final: list[str]
    flags: list[str]
    cost: Cost
    route: str | None = None  # serving | canary | requested (see EvidencePackage)
    as_of: datetime | None = None
    # the package's ranked documents as answered (citations with page, box and offsets), so the
    # reading room can show the evidence of a record; redacted with the record on deletion
    documents: list[EvidenceDocument] = Field(default_factory=list)


EvidencePackage.model_rebuild()
QueryRecord.model_rebuild()
