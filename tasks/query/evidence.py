"""The evidence package: the final ranking with, per document, source and revision, digest,
cited chunks with page and box spans, stage ranks, confirmations and rationales."""
from __future__ import annotations

from schemas.query import EvidenceDocument, EvidenceSpan, StageRanks
from schemas.retrieval import Hit
from tasks.query.agent import AgentState
from tasks.query.lineage import LineageLookup
from tasks.query.rerank import Candidate

MAX_SPANS = 3  # cited chunks per document


def span(hit: Hit, lineage: LineageLookup | None) -> EvidenceSpan:
    spans = lineage.chunks.get(hit.chunk_id) if lineage else None
    page = spans.page if spans else hit.page_start
    doc = lineage.docs.get(hit.doc_id) if lineage else None
    confidence = (doc.page_confidence or {}).get(page) if doc and page is not None else None
    return EvidenceSpan(chunk_id=hit.chunk_id, page=page, bbox=spans.bbox if spans else None,
                        char_start=hit.char_start, char_end=hit.char_end, text=hit.text,
                        ocr_confidence=confidence)


def best_ranks(states: list[AgentState], doc_id: str) -> StageRanks:
    """Each stage's best rank of the document over the sub-questions' warm starts."""
    best: dict[str, int] = {}
    for st in states:
        warm = st.warm.get(doc_id)
        for stage, r in (warm.model_dump(exclude={"score"}) if warm else {}).items():
            if r is not None and stage in StageRanks.model_fields:
                best[stage] = min(best.get(stage, r), r)
    return StageRanks(**best)


def document(rank: int, doc_id: str, states: list[AgentState], cand: Candidate | None,
             lineage: LineageLookup | None) -> EvidenceDocument:
    held = [h for st in states for h, _ in st.held.values() if h.doc_id == doc_id]
    seen = [st.retrieved[doc_id] for st in states if doc_id in st.retrieved]
    if cand is not None:
        status, hits = "accepted", cand.hits
    elif held:
        status, hits = "held", held
    else:
        status, hits = "retrieved", seen[:1]
    lin = lineage.docs.get(doc_id) if lineage else None
    first = hits[0] if hits else None
    ranks = best_ranks(states, doc_id)
    ranks.final = rank
    return EvidenceDocument(
        doc_id=doc_id, rank=rank, corpus=first.corpus if first else None,
        date=first.date if first else None, revision=lin.revision_id if lin else None,
        digest=lin.digest if lin else None, source_id=lin.source_id if lin else None,
        status=status, confirmations=cand.confirmations if cand else 0,
        sub_questions=sorted(set(cand.sub_questions)) if cand else [],
        rationales=cand.rationales if cand else [], ranks=ranks,
        evidence=[span(h, lineage) for h in hits[:MAX_SPANS]],
        title=lin.title if lin else None, ocr_confidence=lin.ocr_confidence if lin else None)
