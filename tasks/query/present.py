"""The evidence package as plain text for the CLI (the Prefect artifact is rendered by
flows/artifacts/evidence.py). A pure function; the caller prints."""
from __future__ import annotations

from schemas.query import EvidenceDocument, EvidencePackage


def route_note(p: EvidencePackage) -> str:
    """How the generation was chosen, when it is not everyone's, and the query time if named."""
    route = f" ({p.route} route)" if p.route and p.route != "serving" else ""
    return route + (f" as of {p.as_of.isoformat()}" if p.as_of else "")


def _ranks(d: EvidenceDocument) -> str:
    r = d.ranks
    parts = [f"{k} {v}" for k, v in (("bm25", r.bm25), ("dense", r.dense),
                                      ("temporal", r.temporal), ("fused", r.fused)) if v]
    return ", ".join(parts) or "no warm-start rank"


def _cite(d: EvidenceDocument) -> str:
    if not d.evidence:
        return ""
    e = d.evidence[0]
    where = f"p.{e.page}" if e.page is not None else "page ?"
    box = f" box {[round(x) for x in e.bbox]}" if e.bbox else ""
    ocr = f", OCR {e.ocr_confidence:.0%}" if e.ocr_confidence is not None else ""
    return f"{e.chunk_id}, {where}{box}, chars {e.char_start}-{e.char_end}{ocr}"


def _snippet(d: EvidenceDocument, chars: int = 220) -> str:
    return " ".join(d.evidence[0].text.split())[:chars] if d.evidence else ""


def render_text(p: EvidencePackage, limit: int = 10) -> str:
    lines = [f"Q: {p.question}",
             f"generation {p.generation}{route_note(p)} · provider {p.provider} ({p.model}) · "
             f"{len(p.accepted)} accepted · {p.cost.llm_calls} calls · "
             f"{p.cost.total_s:.2f}s (model {p.cost.model_s:.2f}s, framework {p.cost.framework_s:.2f}s)"]
    if p.flags:
        lines.append("flags: " + ", ".join(p.flags))
    for d in p.documents[:limit]:
        mark = {"accepted": "✓", "held": "?", "retrieved": " "}[d.status]
        conf = f"{d.confirmations}× confirmed" if d.confirmations else d.status
        lines.append(f"{d.rank:>2}. {mark} {d.doc_id}  [{d.corpus}, {d.date}]  {conf}")
        if d.title:
            lines.append(f"      title: {d.title}")
        if d.rationales:
            lines.append(f"      why: {d.rationales[0]}")
        lines.append(f"      cite: {_cite(d)}  rev {(d.revision or '?')[:16]}  sha256 "
                     f"{(d.digest or '?')[:12]}")
        lines.append(f"      ranks: {_ranks(d)}")
        if (s := _snippet(d)):
            lines.append(f"      « {s} »")
    if p.record:
        lines.append(f"record: {p.record}")
    return "\n".join(lines)
