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
  fit, channel agreement and warm-start rank; rationales name what matched.
- briefing: accepted dates, the people the accepted texts name, unmatched entities as gaps.
- replan: a sub-question that accepted nothing is retried over all corpora, within the cap.
- rerank: within a confirmation group, each sub-question's own order first, so the best
  document of every sub-corpus surfaces before the second of any.
"""
from __future__ import annotations

import json
from typing import Any

from tasks.llm import cues
from tasks.llm.base import Completion, LlmRequest

RATIONALE_MAX = 120


class RulesProvider:
    name = "rules"
    model = "rules-v1"

    # thresholds of the review score (see `score_hit`)
    accept_at = 2.0
    hold_at = 1.0

    def complete(self, request: LlmRequest) -> Completion:
        handler = getattr(self, f"_{request.purpose}", None)
        if handler is None:
            raise ValueError(f"rules provider has no policy for {request.purpose!r}")
        return Completion(text=json.dumps(handler(request.context), ensure_ascii=False))

    # plan -----------------------------------------------------------------------------------
    def _plan(self, ctx: dict[str, Any]) -> dict[str, Any]:
        question = ctx["question"]
        allowed = list(ctx.get("corpora") or [])
        cap = int(ctx.get("max_sub_questions", 4))
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
        subs = [{"text": text, "target_corpus": t, "entities": ents, "dates": dates}
                for t in targets[:cap]]
        return {"sub_questions": subs}

    # agent steps ------------------------------------------------------------------------------
    def _search(self, ctx: dict[str, Any]) -> dict[str, Any]:
        sq = ctx["sub_question"]
        target = sq.get("target_corpus")
        done = {s["tool"] for s in ctx.get("searches", [])}
        bridge = briefing_entities(ctx)
        plan: list[tuple[str, dict[str, Any]]] = []
        window = date_window(sq, ctx.get("briefings", []))
        if window:
            plan.append(("date_range", {"date_from": window[0], "date_to": window[1],
                                        "corpus": target, "query": sq["text"]}))
        if bridge:
            plan.append(("bm25", {"query": " ".join([sq["text"], *bridge[:2]]), "corpus": target}))
        distinctive = sorted(sq.get("entities", []) or bridge, key=lambda e: -len(cues.squash(e)))
        if distinctive:
            plan.append(("substring", {"text": distinctive[0], "corpus": target}))
        plan.append(("dense", {"query": sq["text"], "corpus": target}))
        todo = [(tool, args) for tool, args in plan if tool not in done]
        if not todo or ctx.get("budget_left", 0) < 2:
            action, args, thought = "finish", {}, "every planned search was run"
        else:
            action, args = todo[0]
            thought = f"next: {action} for {target or 'all corpora'}"
        return {"thought": thought, "action": action, "args": args,
                "memory_update": self._memory(ctx, next_step=thought)}

    def _review(self, ctx: dict[str, Any]) -> dict[str, Any]:
        verdicts = []
        for hit in ctx.get("hits", []):
            score, why = score_hit(hit, ctx)
            verdict = ("accept" if score >= self.accept_at else
                       "hold" if score >= self.hold_at else "reject")
            verdicts.append({"chunk_id": hit["chunk_id"], "verdict": verdict,
                             "rationale": rationale(why, score)})
        n_acc = sum(v["verdict"] == "accept" for v in verdicts)
        return {"thought": f"{n_acc} of {len(verdicts)} hits accepted", "action": "review",
                "args": {"verdicts": verdicts},
                "memory_update": self._memory(ctx, next_step="search further")}

    def _held_review(self, ctx: dict[str, Any]) -> dict[str, Any]:
        decisions = []
        for hit in ctx.get("held", []):
            score, why = score_hit(hit, ctx)
            has_entity = any(w.startswith(("entity", "bridge")) for w in why)
            decision = ("promote" if score >= self.accept_at and has_entity else
                        "reject" if score < self.hold_at else "keep")
            decisions.append({"chunk_id": hit["chunk_id"], "decision": decision,
                              "rationale": rationale(why, score)})
        return {"decisions": decisions}

    def _memory(self, ctx: dict[str, Any], next_step: str) -> dict[str, str]:
        sq = ctx["sub_question"]
        accepted = ctx.get("accepted", [])
        briefs = ctx.get("briefings", [])
        return {
            "prior_findings": " | ".join(b.get("summary", "") for b in briefs)[:300],
            "question_analysis": (f"target {sq.get('target_corpus') or 'all'}; entities "
                                  f"{', '.join(sq.get('entities', [])) or 'none'}")[:300],
            "evidence_gathered": ", ".join(a["doc_id"] for a in accepted)[:300],
            "gaps_remaining": "" if accepted else "no document accepted yet",
            "next_steps": next_step,
        }

    # between sub-questions ----------------------------------------------------------------------
    def _briefing(self, ctx: dict[str, Any]) -> dict[str, Any]:
        sq = ctx["sub_question"]
        accepted = ctx.get("accepted", [])
        dates = list(dict.fromkeys(a["date"] for a in accepted if a.get("date")))[:3]
        texts = " ".join(a.get("text", "") for a in accepted[:2])
        squashed = cues.squash(texts)
        named = [e for e in sq.get("entities", []) if cues.match_entity(e, squashed) > 0]
        people = [p for p in cues.people_in(texts) if cues.squash(p) not in
                  {cues.squash(e) for e in named}]
        gaps = [e for e in sq.get("entities", []) if e not in named]
        hints = []
        for a in accepted[:2]:
            if a.get("date") and a.get("corpus") == cues.CHAMBER:
                hints.append(f"press reports of the {a['date']} sitting: "
                             f"{a['date']} to {cues.shift(a['date'], 2)}")
        return {
            "summary": (f"{len(accepted)} accepted for {sq.get('target_corpus') or 'all corpora'}"
                        + (f", best {accepted[0]['doc_id']}" if accepted else "")),
            "confirmed_facts": [f"{a['doc_id']} ({a.get('corpus')}, {a.get('date')}): "
                                f"{a.get('rationale', '')}" for a in accepted[:3]],
            "dates": dates,
            "entities": (named + people)[:5],
            "gaps": gaps,
            "search_hints": hints,
        }

    def _replan(self, ctx: dict[str, Any]) -> dict[str, Any]:
        remaining = [dict(s) for s in ctx.get("remaining", [])]
        done = ctx.get("done", [])
        room = int(ctx.get("max_sub_questions", 4)) - len(done) - len(remaining)
        last = done[-1] if done else None
        has_open = any(s.get("target_corpus") is None for s in [*done, *remaining])
        if last and last.get("accepted", 0) == 0 and room > 0 and not has_open:
            remaining.append({"text": last["text"], "target_corpus": None,
                              "entities": last.get("entities", []), "dates": last.get("dates", [])})
            return {"sub_questions": remaining,
                    "reason": "last sub-question accepted nothing: retry over all corpora"}
        return {"sub_questions": remaining, "reason": "plan unchanged"}

    def _rerank(self, ctx: dict[str, Any]) -> dict[str, Any]:
        cands = ctx.get("candidates", [])
        others = ctx.get("accepted_dates", {})

        def cross(c: dict[str, Any]) -> int:
            d = cues.parse_iso(c.get("date"))
            if d is None:
                return 0
            for doc, (corpus, date) in others.items():
                o = cues.parse_iso(date)
                if doc != c["doc_id"] and corpus != c.get("corpus") and o and abs((d - o).days) <= 2:
                    return 1
            return 0

        order = sorted(cands, key=lambda c: (min(c.get("positions") or [99]), -cross(c),
                                             c.get("fused") or 10**6, c["doc_id"]))
        return {"order": [c["doc_id"] for c in order]}


# ---- scoring shared by review and held review ----------------------------------------------

def briefing_entities(ctx: dict[str, Any]) -> list[str]:
    own = {cues.squash(e) for e in ctx["sub_question"].get("entities", [])}
    out = []
    for b in ctx.get("briefings", []):
        out += [e for e in b.get("entities", []) if cues.squash(e) not in own]
    return list(dict.fromkeys(out))


def date_window(sq: dict[str, Any], briefings: list[dict[str, Any]]) -> tuple[str, str] | None:
    """Where to look in time: the sub-question's own dates, else the briefing's confirmed ones,
    shifted for press (reports follow a sitting) or the chamber (a sitting precedes a report)."""
    dates = sorted(sq.get("dates") or [d for b in briefings for d in b.get("dates", [])][:1])
    if not dates:
        return None
    lo, hi = dates[0], dates[-1]
    target = sq.get("target_corpus")
    if sq.get("dates"):
        return lo, hi
    if target in cues.PRESS:
        return cues.shift(lo, -1), cues.shift(hi, 2)
    if target == cues.CHAMBER:
        return cues.shift(lo, -2), hi
    return cues.shift(lo, -2), cues.shift(hi, 2)


def score_hit(hit: dict[str, Any], ctx: dict[str, Any]) -> tuple[float, list[str]]:
    sq = ctx["sub_question"]
    squashed = cues.squash(hit.get("text", ""))
    why: list[str] = []
    score = 0.0
    ents = sq.get("entities", [])
    if ents:
        matches = {e: cues.match_entity(e, squashed) for e in ents}
        frac = sum(matches.values()) / len(ents)
        score += 1.5 * frac  # an entity alone holds; with one more signal it accepts
        hit_names = [e for e, m in matches.items() if m > 0]
        if hit_names:
            why.append("entity " + ", ".join(hit_names))
    bridge = briefing_entities(ctx)
    b = max((cues.match_entity(e, squashed) for e in bridge), default=0.0)
    if b:
        score += 0.75 * b
        why.append("bridge " + ", ".join(e for e in bridge if cues.match_entity(e, squashed)))
    window = date_window(sq, ctx.get("briefings", []))
    if window and hit.get("date") and window[0] <= hit["date"] <= window[1]:
        score += 1.0
        why.append(f"date {hit['date']} in {window[0]}..{window[1]}")
    warm = hit.get("warm") or {}
    agree = sum(1 for c in ("bm25", "dense", "temporal") if (warm.get(c) or 99) <= 10)
    if agree >= 2:
        score += 0.5
        why.append(f"{agree} channels agree")
    fused = warm.get("fused")
    if fused is not None and fused <= 3:
        score += 1.0
        why.append(f"fused #{fused}")
    elif fused is not None and fused <= 10:
        score += 0.5
        why.append(f"fused #{fused}")
    elif hit.get("rank") is not None and hit["rank"] <= 3 and hit.get("tool") != "warm":
        score += 0.5
        why.append(f"{hit.get('tool')} #{hit['rank']}")
    if hit.get("widened"):
        why.append("widened date")
    return score, why


def rationale(why: list[str], score: float) -> str:
    text = "; ".join(why) if why else "nothing matched"
    text = f"{text} (score {score:.1f})"
    return text if len(text) <= RATIONALE_MAX else text[:RATIONALE_MAX - 1] + "…"
