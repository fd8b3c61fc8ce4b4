"""Query contracts: the TRACE loop's questions, plans, steps, verdicts, memory, briefings,
evidence packages and query records — and the JSON Schemas of every model output.

Every LLM call answers one of the OUTPUT_SCHEMAS below; the provider layer validates the
answer against it with `jsonschema` before anything downstream reads it.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

RATIONALE_MAX = 120  # characters: the agent's accept rationale must fit a citation line

Decision = Literal["accept", "reject", "hold"]
SearchTool = Literal["bm25", "dense", "date_range", "substring"]


class Question(BaseModel):
    question: str
    question_id: str | None = None


class SubQuestion(BaseModel):
    text: str
    target_corpus: str | None = None  # one sub-corpus, or None for all the principal may read
    entities: list[str] = Field(default_factory=list)  # surface forms as written in the question
    dates: list[str] = Field(default_factory=list)  # ISO dates the sub-question is about
    origin: Literal["planner", "replanner"] = "planner"


class Plan(BaseModel):
    sub_questions: list[SubQuestion]


class Memory(BaseModel):
    """The agent's five-slot working memory; each step replaces it whole."""

    prior_findings: str = ""
    question_analysis: str = ""
    evidence_gathered: str = ""
    gaps_remaining: str = ""
    next_steps: str = ""


class Verdict(BaseModel):
    chunk_id: str
    doc_id: str
    decision: Decision
    rationale: str = Field(default="", max_length=RATIONALE_MAX)
    sub_question: int
    step: int
    # who decided: the agent's review, the silent date widening, or held re-evaluation
    by: Literal["agent", "widening", "held_review", "auto"] = "agent"


class Briefing(BaseModel):
    """What one sub-question hands to the next: the only channel between them."""

    summary: str = ""
    confirmed_facts: list[str] = Field(default_factory=list)
    dates: list[str] = Field(default_factory=list)
    entities: list[str] = Field(default_factory=list)
    gaps: list[str] = Field(default_factory=list)
    search_hints: list[str] = Field(default_factory=list)
    # stamped by the loop, not written by the model: the accepted documents behind the facts
    documents: list[dict[str, Any]] = Field(default_factory=list)  # {doc_id, corpus, date}


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
    output: dict[str, Any] | None = None
    feedback: str | None = None
    channel: ChannelResult | None = None
    verdicts: list[Verdict] = Field(default_factory=list)
    memory: Memory = Field(default_factory=Memory)
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


class EvidenceSpan(BaseModel):
    chunk_id: str
    page: int | None
    bbox: list[float] | None
    char_start: int
    char_end: int
    text: str


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
    record: str | None = None
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
    principal: dict[str, Any]
    generation: str
    space_id: str
    provider: str
    model: str | None
    params: dict[str, Any]
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


# ---- JSON Schemas of model outputs ----------------------------------------------------------

_STR_LIST = {"type": "array", "items": {"type": "string"}}

MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {k: {"type": "string"} for k in Memory.model_fields},
    "required": list(Memory.model_fields),
    "additionalProperties": False,
}

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sub_questions": {
            "type": "array", "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1},
                    "target_corpus": {"type": ["string", "null"]},
                    "entities": _STR_LIST,
                    "dates": _STR_LIST,
                },
                "required": ["text", "target_corpus", "entities"],
            },
        },
    },
    "required": ["sub_questions"],
}

_SEARCH_ARGS = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "text": {"type": "string"},
        "corpus": {"type": ["string", "null"]},
        "date_from": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
        "date_to": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
    },
}

# A search step: pick a tool (or finish). Which fields each tool needs is checked by the tool.
SEARCH_STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thought": {"type": "string"},
        "action": {"enum": ["bm25", "dense", "date_range", "substring", "finish"]},
        "args": _SEARCH_ARGS,
        "memory_update": MEMORY_SCHEMA,
    },
    "required": ["thought", "action", "args", "memory_update"],
}

VERDICT_ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "chunk_id": {"type": "string"},
        "verdict": {"enum": ["accept", "reject", "hold"]},
        "rationale": {"type": "string", "maxLength": RATIONALE_MAX},
    },
    "required": ["chunk_id", "verdict", "rationale"],
}

REVIEW_STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "thought": {"type": "string"},
        "action": {"const": "review"},
        "args": {
            "type": "object",
            "properties": {"verdicts": {"type": "array", "items": VERDICT_ITEM_SCHEMA}},
            "required": ["verdicts"],
        },
        "memory_update": MEMORY_SCHEMA,
    },
    "required": ["thought", "action", "args", "memory_update"],
}

HELD_REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "chunk_id": {"type": "string"},
                    "decision": {"enum": ["promote", "reject", "keep"]},
                    "rationale": {"type": "string", "maxLength": RATIONALE_MAX},
                },
                "required": ["chunk_id", "decision", "rationale"],
            },
        },
    },
    "required": ["decisions"],
}

BRIEFING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "confirmed_facts": _STR_LIST,
        "dates": {"type": "array", "items": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}},
        "entities": _STR_LIST,
        "gaps": _STR_LIST,
        "search_hints": _STR_LIST,
    },
    "required": ["summary", "confirmed_facts", "dates", "entities", "gaps", "search_hints"],
}

REPLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # the sub-questions still to run, revised; may add some (the loop enforces the cap)
        "sub_questions": {"type": "array",
                          "items": PLAN_SCHEMA["properties"]["sub_questions"]["items"]},
        "reason": {"type": "string"},
    },
    "required": ["sub_questions", "reason"],
}

RERANK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
    "required": ["order"],
}

OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "plan": PLAN_SCHEMA,
    "search": SEARCH_STEP_SCHEMA,
    "review": REVIEW_STEP_SCHEMA,
    "held_review": HELD_REVIEW_SCHEMA,
    "briefing": BRIEFING_SCHEMA,
    "replan": REPLAN_SCHEMA,
    "rerank": RERANK_SCHEMA,
}


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
