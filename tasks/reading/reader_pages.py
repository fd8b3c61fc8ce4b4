"""The reader's pages as plain values: an evidence page read at a glance (the accepted documents
first, a page of them at a time, each with its passage and one line of why; the documents found
but not accepted folded below) and the list of documents (titles, search, filters, pages).

Filtering and paging happen here, over views already cut to what the viewer may see
(tasks/reading/views.py): nothing here widens what is shown, it only narrows it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from tasks.reading.catalog import Catalog, RevisionInfo
from tasks.reading.listing import ListFilter, Paged, has_words, in_dates, paginate
from tasks.reading.views import CitationView, DocumentEvidence, EvidenceView
from tasks.reading.wording import (corpus_label, french_date, media_label, plain_why, reader_notes,
                                   reader_title, status_label)

EVIDENCE_PER_PAGE = 5  # accepted documents per evidence page
DOCUMENTS_PER_PAGE = 50
EXCERPT_CHARS = 240  # of a folded document's passage


def document_title(catalog: Catalog | None, revision: RevisionInfo) -> tuple[str, bool]:
    """(title, supplied) of a revision: its own, or one made from its first page, its corpus
    and date, or its id (tasks/reading/wording.py) — never empty."""
    pages = catalog.pages.get(revision.revision_id, []) if catalog else []
    first = next((p.raw_text for p in pages if p.raw_text.strip()), "")
    title = revision.title
    if title and title.strip() in (revision.doc_id, PurePosixPath(revision.uri or "").stem):
        title = None  # a file's own name stands in for a title at ingest: not one to read
    return reader_title(title, revision.doc_id, first, revision.corpus, revision.date)


@dataclass
class EvidenceCard:
    """One document of an answer as the reader sees it."""

    doc: DocumentEvidence
    title: str = ""
    supplied: bool = False  # a title made for it, shown in square brackets
    corpus: str = ""
    date: str = ""
    status: str = ""
    why: str = ""
    citation: CitationView | None = None  # the first (shown at once); the others folded
    more: list[CitationView] | None = None
    excerpt: str = ""  # a folded document's passage, shortened

    @property
    def rank(self) -> int:
        return self.doc.rank


@dataclass
class EvidencePage:
    view: EvidenceView
    filter: ListFilter
    accepted: Paged[EvidenceCard]  # accepted documents, and those withdrawn since, by rank
    others: list[EvidenceCard]  # found, not accepted
    corpora: list[tuple[str, str]]  # (value, label) of the corpora in this answer
    notes: list[str]
    total_accepted: int
    total_others: int


def excerpt(citation: CitationView | None, limit: int = EXCERPT_CHARS) -> str:
    text = " ".join((citation.cited_text if citation else "").split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:.") + "…"


def card_of(doc: DocumentEvidence, catalog: Catalog | None) -> EvidenceCard:
    if doc.state == "withdrawn":
        return EvidenceCard(doc=doc)
    revision = catalog.revisions.get(doc.current_revision) if catalog and doc.current_revision else None
    title, supplied = (document_title(catalog, revision) if revision else
                       reader_title(doc.title, doc.doc_id, "", doc.corpus, doc.date))
    citation = doc.citations[0] if doc.citations else None
    return EvidenceCard(doc=doc, title=title, supplied=supplied, corpus=corpus_label(doc.corpus),
                        date=french_date(doc.date), status=status_label(doc.status),
                        why=plain_why(doc.rationales, doc.confirmations), citation=citation,
                        more=doc.citations[1:], excerpt=excerpt(citation))


def matches(doc: DocumentEvidence, chosen: ListFilter) -> bool:
    if doc.state == "withdrawn":  # nothing of it is known any more: shown only unfiltered
        return not (chosen.corpus or chosen.date_from or chosen.date_to or chosen.q)
    if chosen.corpus and doc.corpus != chosen.corpus:
        return False
    if chosen.q and not has_words(f"{doc.title or ''} {doc.doc_id} {doc.corpus or ''}", chosen.q):
        return False
    return in_dates(doc.date, chosen.date_from, chosen.date_to)


def evidence_page(view: EvidenceView, catalog: Catalog | None, chosen: ListFilter,
                  per_page: int = EVIDENCE_PER_PAGE) -> EvidencePage:
    docs = sorted(view.documents, key=lambda d: d.rank)
    # accepted evidence first: the accepted, and what was cited and has been withdrawn since
    main = [d for d in docs if d.status == "accepted" or d.state == "withdrawn"]
    rest = [d for d in docs if not (d.status == "accepted" or d.state == "withdrawn")]
    shown_main = [d for d in main if matches(d, chosen)]
    shown_rest = [] if chosen.accepted_only else [d for d in rest if matches(d, chosen)]
    paged = paginate(shown_main, chosen.page, per_page)
    corpora = sorted({d.corpus for d in docs if d.state != "withdrawn" and d.corpus})
    return EvidencePage(
        view=view, filter=chosen,
        accepted=Paged([card_of(d, catalog) for d in paged.items], paged.number, paged.pages,
                       paged.total, paged.per_page),
        others=[card_of(d, catalog) for d in shown_rest],
        corpora=[(c, corpus_label(c)) for c in corpora], notes=reader_notes(view.record.flags),
        total_accepted=sum(d.status == "accepted" for d in docs), total_others=len(rest))


# ---- the document list ---------------------------------------------------------------------

@dataclass(frozen=True)
class DocumentRow:
    revision: RevisionInfo
    title: str
    supplied: bool
    corpus: str
    date: str
    format: str


@dataclass
class DocumentsPage:
    rows: Paged[DocumentRow]
    filter: ListFilter
    corpora: list[tuple[str, str]]
    total: int  # visible to the viewer, before filtering


def documents_page(catalog: Catalog | None, revisions: list[RevisionInfo], chosen: ListFilter,
                   per_page: int = DOCUMENTS_PER_PAGE) -> DocumentsPage:
    rows = []
    for r in revisions:
        if chosen.corpus and r.corpus != chosen.corpus:
            continue
        if not in_dates(r.date, chosen.date_from, chosen.date_to):
            continue
        title, supplied = document_title(catalog, r)
        if chosen.q and not has_words(f"{title} {r.title or ''} {r.doc_id} {r.corpus or ''}", chosen.q):
            continue
        rows.append(DocumentRow(r, title, supplied, corpus_label(r.corpus), french_date(r.date),
                                media_label(r.media_type)))
    # by date, then title: how a reader walks a fonds; undated documents last
    rows.sort(key=lambda row: (row.revision.date is None, row.revision.date or "", row.title.casefold()))
    corpora = sorted({r.corpus for r in revisions if r.corpus})
    return DocumentsPage(rows=paginate(rows, chosen.page, per_page), filter=chosen,
                         corpora=[(c, corpus_label(c)) for c in corpora], total=len(revisions))
