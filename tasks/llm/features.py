"""Features of a (question, sub-question, passage) triple for the learned judge.

Everything here is something the loop already has or can compute cheaply from the typed step
context: the passage's channel ranks and their agreement, the whole question's ranking, names
matched OCR-tolerantly, the date's fit with the briefing and with documents of another
sub-corpus, corpus cues of the question, and where the chunk sits in its document. Nothing
names a question, a person, a date or a document: the features are the same for any archive
with the same sub-corpora roles (a chamber and its press).

Missing values are NaN (the gradient-boosted trees route them on their own).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from schemas.query import StepContext
from schemas.retrieval import Hit
from tasks.llm import cues
from tasks.llm.rules import briefing_entities, date_window
from tasks.index.analyzer import words
from tasks.query.analysis import question_query

NAN = float("nan")
TOOLS = ("warm", "bm25", "dense", "date_range", "substring")
FEATURE_VERSION = "judge-features-1"

FEATURES = (
    # where the passage's document stands in the retrieval channels
    "warm_fused", "warm_bm25", "warm_dense", "warm_score", "channels_top10", "question_rank",
    "support", "tool", "tool_rank", "widened",
    # where it stands relative to the other passages under review
    "support_rank_in_batch", "support_over_best",
    # corpus cues
    "hit_chamber", "targeted", "open_sub_question", "paper_named", "papers_named",
    "question_chamber_cue", "question_press_cue",
    # names and words of the question in the passage (OCR-tolerant)
    "entities", "entity_match_mean", "entity_match_max", "entity_full_matches", "bridge_match",
    "term_overlap", "term_overlap_idf",
    # dates: the briefing's window, and documents of another sub-corpus whose date relates
    "in_date_window", "days_from_window", "affinity_accepted", "pair_rank", "pair_weak_rank",
    "dated",
    # the chunk in its document, and the loop's own position
    "ordinal", "doc_chunks", "relative_position", "text_chars", "sub_question_index",
    "accepted_here",
)


@functools.lru_cache(maxsize=4096)
def _question_terms(question: str, corpora: tuple[str, ...]) -> frozenset[str]:
    return frozenset(cues.squash(w) for w in words(question_query(question, corpora)) if len(w) > 3)


@functools.lru_cache(maxsize=8192)
def _text_terms(text: str) -> frozenset[str]:
    return frozenset(cues.squash(w) for w in words(text) if len(w) > 3)


def _nan(x: float | int | None) -> float:
    return NAN if x is None else float(x)


def _days_outside(date: str | None, window: tuple[str, str] | None) -> float:
    d = cues.parse_iso(date)
    if d is None or window is None:
        return NAN
    lo, hi = cues.parse_iso(window[0]), cues.parse_iso(window[1])
    if lo is None or hi is None:
        return NAN
    return float(max((lo - d).days, (d - hi).days, 0))


def _pair_ranks(hit: Hit, ctx: StepContext) -> tuple[float, float]:
    """Best rank, in the whole question's warm start, of a document of another sub-corpus whose
    date strongly (then weakly) fits this passage's: a debate and its report a day or two later,
    two papers a day apart."""
    strong = weak = math.inf
    for d in ctx.question_candidates:
        if d.doc_id == hit.doc_id:
            continue
        a = cues.date_affinity(hit.corpus, hit.date, d.corpus, d.date)
        if a == 2:
            strong = min(strong, d.rank)
        elif a == 1:
            weak = min(weak, d.rank)
    return (NAN if strong == math.inf else strong), (NAN if weak == math.inf else weak)


def features(hits: list[Hit], ctx: StepContext) -> np.ndarray:
    """One row of FEATURES per passage (float32)."""
    sq = ctx.sub_question
    question = ctx.question
    corpora = tuple(sorted(ctx.corpora))
    papers = cues.named_papers(question)
    chamber_q, press_q = cues.chamber_cue(question), cues.press_cue(question)
    ents = sq.entities
    bridge = briefing_entities(ctx)
    window = date_window(sq, ctx.briefings)
    q_terms = _question_terms(question, corpora)
    supports = sorted((h.support for h in hits), reverse=True)
    best_support = supports[0] if supports else 0.0
    rows = []
    for h in hits:
        squashed = cues.squash(h.text)
        matches = [cues.match_entity(e, squashed) for e in ents]
        t_terms = _text_terms(h.text)
        overlap = len(q_terms & t_terms) / len(q_terms) if q_terms else NAN
        long_terms = [t for t in q_terms if len(t) >= 7]
        overlap_long = (sum(t in t_terms for t in long_terms) / len(long_terms)
                        if long_terms else NAN)
        warm = h.warm
        channels = sum(1 for r in ((warm.bm25, warm.dense, warm.temporal) if warm else ())
                       if r is not None and r <= 10)
        in_window = (1.0 if window and h.date and window[0] <= h.date <= window[1] else
                     0.0 if window else NAN)
        affinity = max((cues.date_affinity(h.corpus, h.date, a.corpus, a.date)
                        for a in ctx.accepted_before), default=NAN)
        pair, pair_weak = _pair_ranks(h, ctx)
        rows.append([
            _nan(warm.fused if warm else None), _nan(warm.bm25 if warm else None),
            _nan(warm.dense if warm else None), _nan(warm.score if warm else None),
            float(channels), _nan(h.question_rank), h.support,
            float(TOOLS.index(h.tool)) if h.tool in TOOLS else NAN, float(h.rank),
            float(h.widened),
            float(supports.index(h.support) + 1), h.support / best_support if best_support else NAN,
            float(h.corpus == cues.CHAMBER), float(sq.target_corpus is not None and
                                                   h.corpus == sq.target_corpus),
            float(sq.target_corpus is None), float(h.corpus in papers), float(len(papers)),
            float(chamber_q), float(press_q),
            float(len(ents)), (sum(matches) / len(matches)) if matches else NAN,
            max(matches, default=NAN), float(sum(m == 1.0 for m in matches)),
            max((cues.match_entity(e, squashed) for e in bridge), default=NAN),
            overlap, overlap_long,
            in_window, _days_outside(h.date, window), affinity, pair, pair_weak,
            float(cues.parse_iso(h.date) is not None),
            _nan(h.ordinal), _nan(h.doc_chunks),
            (h.ordinal / max(1, (h.doc_chunks or 1) - 1)) if h.ordinal is not None else NAN,
            float(len(h.text)), float(len(ctx.briefings)),
            float(len(ctx.accepted)),
        ])
    return np.asarray(rows, dtype=np.float32).reshape(len(hits), len(FEATURES))
