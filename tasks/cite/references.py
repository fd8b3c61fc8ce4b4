"""References made from what the reading room shows: an answer's evidence view, or a document.

Both come out of tasks/reading/views.py, which has already applied the viewer's access now (or
at the answer's as_of): a withdrawn document — deleted, embargoed, no longer the viewer's — is
not in the view's shown documents, so it can never become a reference. Nothing here reads the
warehouse on its own.
"""
from __future__ import annotations

import re
import unicodedata

from schemas.citation import Reference
from tasks.cite.identifiers import container_of, library_identifier, metadata_of
from tasks.reading.catalog import RevisionInfo
from tasks.reading.links import Links
from tasks.reading.room import Visible
from tasks.reading.views import CitationView, DocumentEvidence, EvidenceView

QUOTE_CHARS = 500  # the cited words kept in a reference; the link shows them all


def citation_key(doc_id: str, taken: set[str]) -> str:
    """An ASCII key from the document id (BibTeX keys admit little else), unique in `taken`."""
    folded = unicodedata.normalize("NFKD", doc_id).encode("ascii", "ignore").decode()
    base = re.sub(r"[^A-Za-z0-9_:.-]+", "-", folded).strip("-.:") or "doc"
    key, n = base[:80], 2
    while key in taken:
        key, n = f"{base[:76]}-{n}", n + 1
    taken.add(key)
    return key


def quote_of(text: str, chars: int = QUOTE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= chars else text[:chars - 1].rstrip() + "…"


def region_of(citation: CitationView) -> str | None:
    """The cited words' box on the page in canvas pixels, as a IIIF fragment; None when the
    page has no box for them (the whole page is shown, nothing is pinned)."""
    if citation.kind != "image" or citation.crop is None or not citation.words:
        return None
    c, words = citation.crop, citation.words
    x0, y0 = c.x + min(w.x for w in words), c.y + min(w.y for w in words)
    x1, y1 = c.x + max(w.x + w.w for w in words), c.y + max(w.y + w.h for w in words)
    x, y = max(0, int(x0)), max(0, int(y0))
    return f"xywh={x},{y},{max(1, round(x1 - x))},{max(1, round(y1 - y))}"


def _described(revision: RevisionInfo) -> dict:
    metadata = metadata_of(revision.metadata_json)
    return {"title": revision.title or revision.doc_id, "corpus": revision.corpus,
            "container": container_of(metadata) or revision.corpus, "date": revision.date,
            "identifier": library_identifier(metadata)}


def evidence_references(evidence: EvidenceView, view: Visible, links: Links) -> list[Reference]:
    """The answer's documents the viewer may still see, in ranked order."""
    record, taken, out = evidence.record, set(), []
    for doc in evidence.documents:
        if doc.state == "withdrawn":
            continue
        out.append(_evidence_reference(doc, view.revision(doc.current_revision), record.generation,
                                       record.query_id, record.question.question, links, taken))
    return out


def _evidence_reference(doc: DocumentEvidence, current: RevisionInfo, generation: str, query_id: str,
                        question: str, links: Links, taken: set[str]) -> Reference:
    first = doc.citations[0] if doc.citations else None
    region = region_of(first) if first is not None else None
    image = None
    if first is not None and first.kind == "image" and first.page_no is not None:
        image = links.image(doc.revision or current.revision_id, first.page_no)
        image += f"#{region}" if region else ""
    note = None
    if doc.state == "superseded":
        note = (f"the cited revision no longer serves; the document now serves as revision "
                f"{current.revision_id}")
    return Reference(key=citation_key(doc.doc_id, taken), rank=doc.rank, doc_id=doc.doc_id,
                     **_described(current), page=first.page_no if first else None, region=region,
                     image=image, generation=generation, revision=doc.revision, digest=doc.digest,
                     link=links.evidence(query_id, doc.rank), status=doc.status,
                     quote=quote_of(first.cited_text) if first else None, question=question, note=note)


def document_reference(revision: RevisionInfo, generation: str, links: Links) -> Reference:
    """A document as the viewer sees it now, in the generation routed to them."""
    return Reference(key=citation_key(revision.doc_id, set()), rank=1, doc_id=revision.doc_id,
                     **_described(revision), generation=generation, revision=revision.revision_id,
                     digest=revision.digest, link=links.document(revision.doc_id))
