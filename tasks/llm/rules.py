"""`rules`: the LLM-free offline policy behind the same interface as a model.

It answers every purpose of the loop from the structured context the prompt was rendered
from, never from the prompt text, and returns the same JSON a model must return (validated the
same way). What it does, per purpose:

- plan: one sub-question per sub-corpus the question cues (paper names, chamber vs press
  words), the debate first because its sitting date steers the press, then one over all
  corpora whose acceptances become cross-confirmations; entities as written.
- search: a date range around the briefing's confirmed dates (a newspaper reports a sitting a
  day or two after it), BM25 with the briefing's bridge entities, exact substring of the most
  distinctive entity, dense; each once, then finish.
- review / held review: a score from entity matches (OCR-tolerant), briefing entities, date
  fit, channel agreement and warm-start rank; the best passage of a sub-question is accepted
  (one document per sub-corpus), other good ones held; rationales name what matched.
- briefing: accepted dates, the people the accepted texts name, unmatched entities as gaps.
- replan: a sub-question that accepted nothing is retried over all corpora, within the cap.
- rerank: within a confirmation group, each sub-question's own order first, so the best
  document of every sub-corpus surfaces before the second of any.
"""
from __future__ import annotations

from pydantic import BaseModel

from schemas.query import (RATIONALE_MAX, Briefing, BriefingContext,
                           BriefingOutput, HeldContext, HeldDecision, HeldReview, Memory,
                           PlanContext, PlannedSubQuestion, PlanOutput, ReplanContext,
                           ReplanOutput, RerankCandidate, RerankContext, RerankOutput,
                           ReviewArgs, ReviewContext, ReviewStep, SearchArgs, SearchStep,
                           StepContext, SubQuestion, VerdictItem)
from schemas.retrieval import Hit
from tasks.llm import cues
from tasks.llm.base import Completion, LlmRequest


class RulesProvider:
    name = "rules"
    model = "rules-v1"
    judge = None  # no learned model (see tasks.llm.learned)

    # thresholds of the review score (see `score_hit`)
    accept_at = 1.5
    hold_at = 1.0

    def __init__(self, fallback_reason: str | None = None):
        # set when the learned judge was wanted but could not be loaded: the loop flags it
        self.fallback_reason = fallback_reason

    def complete(self, request: LlmRequest) -> Completion:
        handler = getattr(self, f"_{request.purpose}", None)
        if handler is None:
            raise ValueError(f"{self.name} provider has no policy for {request.purpose!r}")
        if request.context is None:
            raise ValueError(f"{self.name} provider needs the typed context of a "
                             f"{request.purpose!r} call")
        out: BaseModel = handler(request.context)
        return Completion(text=out.model_dump_json())

    # plan -----------------------------------------------------------------------------------
    def _plan(self, ctx: PlanContext) -> PlanOutput:
        question = ctx.question
        allowed = list(ctx.corpora)
        cap = ctx.max_sub_questions
        papers = cues.named_papers(question)
        targets: list[str | None] = []
        if len(papers) < 2 and (cues.chamber_cue(question) or not papers):
            targets.append(cues.CHAMBER)
        targets += papers or [p for p in cues.PRESS]
        targets.append(None)
        targets = [t for t in targets if t is None or t in allowed]
        text = cues.strip_papers(question) or question
        ents = cues.entities(text)
        dates = cues.dates_in(question)
        subs = [PlannedSubQuestion(text=text, target_corpus=t, entities=ents, dates=dates)
                for t in targets[:cap]]
        return PlanOutput(sub_questions=subs)

    # agent steps ------------------------------------------------------------------------------
    def _search(self, ctx: StepContext) -> SearchStep:
        sq = ctx.sub_question
        target = sq.target_corpus
        done = {s.tool for s in ctx.searches}
        bridge = briefing_entities(ctx)
        plan: list[tuple[str, SearchArgs]] = []
        window = date_window(sq, ctx.briefings)
        if window:
            plan.append(("date_range", SearchArgs(date_from=window[0], date_to=window[1],
                                                  corpus=target, query=sq.text)))
        if bridge:
            plan.append(("bm25", SearchArgs(query=" ".join([sq.text, *bridge[:2]]), corpus=target)))
        distinctive = sorted(sq.entities or bridge, key=lambda e: -len(cues.squash(e)))
        if distinctive:
            plan.append(("substring", SearchArgs(text=distinctive[0], corpus=target)))
        plan.append(("dense", SearchArgs(query=sq.text, corpus=target)))
        todo = [(tool, args) for tool, args in plan if tool not in done]
        if not todo or ctx.budget_left < 2:
            action, args, thought = "finish", SearchArgs(), "every planned search was run"
        else:
            action, args = todo[0]
            thought = f"next: {action} for {target or 'all corpora'}"
        return SearchStep(thought=thought, action=action, args=args,
                          memory_update=self._memory(ctx, next_step=thought))

    def _review(self, ctx: ReviewContext) -> ReviewStep:
        # One document per sub-question: a sub-question targets one sub-corpus, and the gold
        # of a question is one document per sub-corpus, so the best-scoring passage is
        # accepted and the other good ones held (they still rank through the warm start).
        scored = [(hit, *score_hit(hit, ctx)) for hit in ctx.hits]
        best = max(scored, key=lambda x: x[1], default=None)
        room = not ctx.accepted
        verdicts = []
        for hit, score, why in scored:
            accept = room and hit is best[0] and score >= self.accept_at
            verdict = ("accept" if accept else "hold" if score >= self.hold_at else "reject")
            verdicts.append(VerdictItem(chunk_id=hit.chunk_id, verdict=verdict,
                                        rationale=rationale(why, score)))
        n_acc = sum(v.verdict == "accept" for v in verdicts)
        return ReviewStep(thought=f"{n_acc} of {len(verdicts)} hits accepted", action="review",
                          args=ReviewArgs(verdicts=verdicts),
                          memory_update=self._memory(ctx, next_step="search further"))

    def _held_review(self, ctx: HeldContext) -> HeldReview:
        scored = [(hit, *score_hit(hit, ctx)) for hit in ctx.held]
        eligible = [x for x in scored if x[1] >= self.accept_at
                    and any(w.startswith(("entity", "bridge", "date")) for w in x[2])]
        best = max(eligible, key=lambda x: x[1], default=None)
        room = not ctx.accepted
        decisions = []
        for hit, score, why in scored:
            decision = ("promote" if room and best is not None and hit is best[0] else
                        "reject" if score < self.hold_at else "keep")
            decisions.append(HeldDecision(chunk_id=hit.chunk_id, decision=decision,
                                          rationale=rationale(why, score)))
        return HeldReview(decisions=decisions)

    def _memory(self, ctx: StepContext, next_step: str) -> Memory:
        sq = ctx.sub_question
        return Memory(
            prior_findings=" | ".join(b.summary for b in ctx.briefings)[:300],
            question_analysis=(f"target {sq.target_corpus or 'all'}; entities "
                               f"{', '.join(sq.entities) or 'none'}")[:300],
            evidence_gathered=", ".join(a.doc_id for a in ctx.accepted)[:300],
            gaps_remaining="" if ctx.accepted else "no document accepted yet",
            next_steps=next_step,
        )

    # between sub-questions ----------------------------------------------------------------------
    def _briefing(self, ctx: BriefingContext) -> BriefingOutput:
        sq = ctx.sub_question
        accepted = ctx.accepted
        dates = list(dict.fromkeys(a.date for a in accepted if a.date))[:3]
        texts = " ".join(a.text for a in accepted[:2])
        squashed = cues.squash(texts)
        named = [e for e in sq.entities if cues.match_entity(e, squashed) > 0]
        people = [p for p in cues.people_in(texts) if cues.squash(p) not in
                  {cues.squash(e) for e in named}]
        gaps = [e for e in sq.entities if e not in named]
        hints = []
        for a in accepted[:2]:
            if a.date and a.corpus == cues.CHAMBER:
                hints.append(f"press reports of the {a.date} sitting: "
                             f"{a.date} to {cues.shift(a.date, 2)}")
        return BriefingOutput(
            summary=(f"{len(accepted)} accepted for {sq.target_corpus or 'all corpora'}"
                     + (f", best {accepted[0].doc_id}" if accepted else "")),
            confirmed_facts=[f"{a.doc_id} ({a.corpus}, {a.date}): {a.rationale}"
                             for a in accepted[:3]],
            dates=[d for d in dates if cues.parse_iso(d)],
            entities=(named + people)[:5],
            gaps=gaps,
            search_hints=hints,
        )

    def _replan(self, ctx: ReplanContext) -> ReplanOutput:
        remaining = [planned(s) for s in ctx.remaining]
        done = ctx.done
        room = ctx.max_sub_questions - len(done) - len(remaining)
        last = done[-1] if done else None
        has_open = any(s.target_corpus is None for s in [*done, *ctx.remaining])
        if last and last.accepted == 0 and room > 0 and not has_open:
            remaining.append(planned(last).model_copy(update={"target_corpus": None}))
            return ReplanOutput(sub_questions=remaining,
                                reason="last sub-question accepted nothing: retry over all corpora")
        return ReplanOutput(sub_questions=remaining, reason="plan unchanged")

    @staticmethod
    def rerank_key(c: RerankCandidate, cross: int) -> tuple:
        return (-c.support, -cross, min(c.positions or [99]), c.doc_id)

    def _rerank(self, ctx: RerankContext) -> RerankOutput:
        def cross(c: RerankCandidate) -> int:
            return max((cues.date_affinity(c.corpus, c.date, o.corpus, o.date)
                        for o in ctx.accepted if o.doc_id != c.doc_id), default=0)

        order = sorted(ctx.candidates, key=lambda c: self.rerank_key(c, cross(c)))
        return RerankOutput(order=[c.doc_id for c in order])


def planned(sq: SubQuestion) -> PlannedSubQuestion:
    """A sub-question as a plan output names it (the dates a plan may carry are ISO only)."""
    return PlannedSubQuestion(text=sq.text, target_corpus=sq.target_corpus,
                              entities=list(sq.entities),
                              dates=[d for d in sq.dates if cues.parse_iso(d)])


# ---- scoring shared by review and held review ----------------------------------------------

def briefing_entities(ctx: StepContext) -> list[str]:
    own = {cues.squash(e) for e in ctx.sub_question.entities}
    out = []
    for b in ctx.briefings:
        out += [e for e in b.entities if cues.squash(e) not in own]
    return list(dict.fromkeys(out))


def date_window(sq: SubQuestion, briefings: list[Briefing]) -> tuple[str, str] | None:
    """Where to look in time: the sub-question's own dates (±1 day), else the first briefing's
    confirmed date, shifted by what reports what: a newspaper reports a sitting one or two days
    after it, the other paper reports the same event a day before or after."""
    if sq.dates:
        dates = sorted(sq.dates)
        return cues.shift(dates[0], -1), cues.shift(dates[-1], 1)
    for b in briefings:
        dated = [x for x in b.documents if x.date]
        if dated:
            d, source = dated[0].date, dated[0].corpus
            break
        if b.dates:
            d, source = b.dates[0], None
            break
    else:
        return None
    target = sq.target_corpus
    if source == cues.CHAMBER and target in cues.PRESS:
        return cues.shift(d, 1), cues.shift(d, 2)
    if source in cues.PRESS and target == cues.CHAMBER:
        return cues.shift(d, -2), cues.shift(d, -1)
    return cues.shift(d, -1), cues.shift(d, 1)


# Weights of the review score, set on the development questions (docs/benchmarks.md, issue 4):
# the warm-start rank carries most of the evidence (a question's gold document is first in its
# sub-corpus's fused list about two times in three); names and dates move a document up.
WEIGHTS = {"entity": 1.0, "bridge": 0.5, "date": 1.0, "agree": 0.25,
           "fused": {1: 1.5, 2: 1.0, 3: 0.75}, "fused_top10": 0.25, "tool_top3": 0.5}


def score_hit(hit: Hit, ctx: StepContext) -> tuple[float, list[str]]:
    w = WEIGHTS
    sq = ctx.sub_question
    squashed = cues.squash(hit.text)
    why: list[str] = []
    score = 0.0
    ents = sq.entities
    if ents:
        matches = {e: cues.match_entity(e, squashed) for e in ents}
        score += w["entity"] * sum(matches.values()) / len(ents)
        hit_names = [e for e, m in matches.items() if m > 0]
        if hit_names:
            why.append("entity " + ", ".join(hit_names))
    bridge = briefing_entities(ctx)
    b = max((cues.match_entity(e, squashed) for e in bridge), default=0.0)
    if b:
        score += w["bridge"] * b
        why.append("bridge " + ", ".join(e for e in bridge if cues.match_entity(e, squashed)))
    window = date_window(sq, ctx.briefings)
    if window and hit.date and window[0] <= hit.date <= window[1]:
        score += w["date"]
        why.append(f"date {hit.date} in {window[0]}..{window[1]}")
    warm = hit.warm
    agree = sum(1 for r in ((warm.bm25, warm.dense, warm.temporal) if warm else ())
                if (r or 99) <= 10)
    if agree >= 2:
        score += w["agree"]
        why.append(f"{agree} channels agree")
    fused = warm.fused if warm else None
    if fused is not None and fused <= 10:
        score += w["fused"].get(fused, w["fused_top10"])
        why.append(f"fused #{fused}")
    elif hit.rank is not None and hit.rank <= 3 and hit.tool != "warm":
        score += w["tool_top3"]
        why.append(f"{hit.tool} #{hit.rank}")
    if hit.widened:
        why.append("widened date")
    return score, why


def rationale(why: list[str], score: float) -> str:
    text = "; ".join(why) if why else "nothing matched"
    text = f"{text} (score {score:.1f})"
    return text if len(text) <= RATIONALE_MAX else text[:RATIONALE_MAX - 1] + "…"
