"""`learned`: the offline policy whose relevance judgment is a trained model.

It plans, searches, briefs and replans like `rules` (tasks/llm/rules.py); what it changes is
judgment. Each passage under review gets a calibrated probability that its document is gold
for the question (tasks/llm/judge_model.py over tasks/llm/features.py); the thresholds turn it
into accept / hold / reject, held passages are re-scored once the search is over, and inside a
confirmation group documents are ordered by that probability. The probability travels with
each verdict as its `confidence`, and the rationale names what matched.
"""
from __future__ import annotations

from pathlib import Path

from schemas.query import (HeldContext, HeldDecision, HeldReview, RerankContext, RerankOutput,
                           ReviewArgs, ReviewContext, ReviewStep, StepContext, VerdictItem)
from tasks.llm.features import features
from tasks.llm.judge_model import JudgeModel
from tasks.llm.rules import RATIONALE_MAX, RulesProvider, score_hit


class LearnedProvider(RulesProvider):
    name = "learned"

    def __init__(self, model: JudgeModel):
        super().__init__()
        self.judge_model = model
        self.judge = model.info()
        self.model = f"learned-{(model.digest or 'unsaved').removeprefix('sha256:')[:12]}"

    @classmethod
    def from_file(cls, path: Path | None = None) -> "LearnedProvider":
        return cls(JudgeModel.load(path))

    def _scored(self, hits, ctx: StepContext) -> list[tuple[object, float, str]]:
        p = self.judge_model.probabilities(features(hits, ctx)) if hits else []
        return [(h, float(x), explain(h, ctx, float(x))) for h, x in zip(hits, p)]

    def _review(self, ctx: ReviewContext) -> ReviewStep:
        t = self.judge_model.thresholds
        verdicts = []
        for hit, p, why in self._scored(ctx.hits, ctx):
            verdict = "accept" if p >= t.accept else "hold" if p >= t.hold else "reject"
            verdicts.append(VerdictItem(chunk_id=hit.chunk_id, verdict=verdict, rationale=why,
                                        confidence=round(p, 4)))
        n_acc = sum(v.verdict == "accept" for v in verdicts)
        return ReviewStep(thought=f"{n_acc} of {len(verdicts)} passages accepted (P ≥ {t.accept})",
                          action="review", args=ReviewArgs(verdicts=verdicts),
                          memory_update=self._memory(ctx, next_step="search further"))

    def _held_review(self, ctx: HeldContext) -> HeldReview:
        t = self.judge_model.thresholds
        decisions = []
        for hit, p, why in self._scored(ctx.held, ctx):
            decision = "promote" if p >= t.accept else "reject" if p < t.hold else "keep"
            decisions.append(HeldDecision(chunk_id=hit.chunk_id, decision=decision,
                                          rationale=why, confidence=round(p, 4)))
        return HeldReview(decisions=decisions)

    def _rerank(self, ctx: RerankContext) -> RerankOutput:
        order = sorted(ctx.candidates, key=lambda c: (-(c.probability or 0.0), -c.support,
                                                      c.doc_id))
        return RerankOutput(order=[c.doc_id for c in order])


def explain(hit, ctx: StepContext, p: float) -> str:
    """The probability first, then the readable cues behind it (names, dates, ranks)."""
    _, why = score_hit(hit, ctx)
    text = f"P {p:.2f}" + ("; " + "; ".join(why) if why else "")
    return text if len(text) <= RATIONALE_MAX else text[:RATIONALE_MAX - 1] + "…"
