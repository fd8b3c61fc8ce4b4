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


class WarmRanks(BaseModel):
    """A document's ranks in one warm start: per channel (None = not listed) and fused."""

    bm25: int | None = None
    dense: int | None = None
    temporal: int | None = None
    fused: int | None = None
    score: float | None = None  # the fused RRF score


# What a search's record keeps of a hit, in this order (texts stay in the generation).
HIT_SUMMARY = ("chunk_id", "doc_id", "corpus", "date", "tool", "rank", "score", "page_start",
               "char_start", "char_end", "widened", "warm", "ordinal", "doc_chunks")


class Hit(BaseModel):
    """A passage and how it ranked, from the channel that found it to the policy that judges it.

    A channel fills the passage and its rank; the loop stamps the tool that searched (`found_by`)
    and its document's warm-start ranks; a review sees it with its document's standing over the
    whole question (`question_rank`, `support`), a briefing with the accept `rationale`."""

    chunk_id: str
    doc_id: str
    score: float = 0.0
    rank: int  # 1-based
    corpus: str | None
    date: str | None
    text: str
    page_start: int | None = None
    char_start: int = 0
    char_end: int = 0
    ordinal: int | None = None  # position of the chunk in its document (0 = opening chunk)
    doc_chunks: int | None = None  # how many chunks its document has
    tool: str | None = None  # warm | bm25 | dense | date_range | substring; None: not yet searched
    widened: bool = False  # came only from the silent ±days widening of a date search
    warm: WarmRanks | None = None  # its document in this sub-question's warm start
    question_rank: int | None = None  # its document in the whole question's warm start
    support: float = 0.0  # RRF of its document over every warm start of the question so far
    rationale: str = ""  # briefing: why it was accepted

    def found_by(self, tool: str, **update: object) -> "Hit":
        """A copy stamped with the tool that found it (the channel's own hit stays as it is)."""
        return self.model_copy(update={"tool": tool, **update})

    def summary(self) -> dict[str, object]:
        """What the record keeps of a hit."""
        d = self.model_dump(include=set(HIT_SUMMARY))
        return {k: d[k] for k in HIT_SUMMARY}


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
    # OCR-quality prior on the fused list (tasks/query/fusion.py `ocr_prior`): a document loses
    # ocr_weight·(1 − quality)/(rrf_k + 1). Off: on held-out folds of the development questions
    # every split chose 0, and any weight above 0 lowered MRR (docs/benchmarks.md, "OCR quality
    # as a ranking prior").
    ocr_weight: float = Field(default=0.0, ge=0.0)
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
