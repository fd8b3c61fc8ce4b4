"""Retrieval contracts: who asks, what each channel returns, and how channels are tuned."""
from __future__ import annotations

from pydantic import BaseModel, Field

CHANNELS = ("bm25", "dense", "temporal")


class Principal(BaseModel):
    """Who is asking. Tenant and groups become a prefilter on every channel."""

    principal_id: str
    tenant: str
    groups: list[str]
    # What the principal may *do* beyond reading: "operator" runs promote, rollback, delete, gc.
    roles: list[str] = Field(default_factory=list)

    @property
    def is_operator(self) -> bool:
        return "operator" in self.roles


class AccessDenied(PermissionError):
    """The principal may not see anything it asked for (e.g. no tenant or no groups)."""


class ChunkHit(BaseModel):
    chunk_id: str
    doc_id: str
    score: float
    rank: int  # 1-based
    corpus: str
    date: str | None
    text: str
    page_start: int
    char_start: int
    char_end: int
    ordinal: int | None = None  # position of the chunk in its document (0 = opening chunk)
    doc_chunks: int | None = None  # how many chunks its document has


class DocHit(BaseModel):
    """A document scored by the best of its chunks (max-pooling)."""

    doc_id: str
    score: float
    rank: int  # 1-based
    best_chunk_id: str
    corpus: str
    date: str | None


class FusedHit(BaseModel):
    """A document after reciprocal-rank fusion; `ranks` keeps each channel's 1-based rank."""

    doc_id: str
    fused_score: float
    rank: int  # 1-based
    ranks: dict[str, int | None]  # keys: "bm25", "dense", "temporal"; None = not in that list
    best_chunk_id: str
    corpus: str
    date: str | None


class RetrievalSettings(BaseModel):
    """Channel parameters; defaults are the ones measured best on the development questions
    (docs/benchmarks.md, "Retrieval quality")."""

    rrf_k: int = 60
    # Weighted RRF: each channel's 1/(k + rank) is multiplied by its weight. Equal weights
    # let the weaker dense channel pull BM25's good documents down; 0.2–0.35 for dense was
    # best on the development questions (docs/benchmarks.md). Temporal only votes when a
    # date is resolvable, and metadata dates are imperfect, so it stays a light vote.
    weights: dict[str, float] = Field(
        default_factory=lambda: {"bm25": 1.0, "dense": 0.3, "temporal": 0.3})
    # How many documents each channel contributes to fusion.
    fusion_depth: int = 100
    # Warm-start query processing: drop question meta-language and sub-corpus names before
    # the lexical channel (and the dense one when strip_question_dense).
    strip_question: bool = True
    strip_question_dense: bool = False
    # Without a target corpus: hold a question that names two or more sub-corpora to them,
    # and interleave sub-corpora in the fused list.
    corpus_cues: bool = True
    balance_corpora: bool = True
    # Chunks the dense channel fetches before max-pooling them to documents.
    dense_candidates: int = 1000
    half_life_days: float = 3.0
    # BM25 parameters and analysis.
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    stem: bool = True
    # Character n-grams of each word beside the words (0 = words only): OCR slips then cost
    # a few grams rather than the whole word; 4 measured best (docs/benchmarks.md).
    char_ngrams: int = 4


class EvalQuestion(BaseModel):
    """One line of an evaluation set; `answer` and other fields are ignored."""

    question_id: str
    question: str
    question_type: str = "untyped"
    gold_ids: list[str] = Field(min_length=1)
