"""The one place a document's link is made, for every artifact that cites documents.

Where a reading room runs (`settings.reading_room.url`), a cited document links to its place on
the answer's evidence page there (the document's page when the answer has no query record);
otherwise to the lineage artifact of the same run (source → revision → digest → pages → chunks).
The reading room's addresses themselves come from tasks/reading/links.py.
"""
from __future__ import annotations

from schemas.query import EvidenceDocument, EvidencePackage
from schemas.settings import MabillonSettings
from tasks.reading.links import Links

# the answer's references as files a reference manager imports (flows/reading_room.py serves them)
EXPORTS = (("ris", "RIS"), ("bibtex", "BibTeX"), ("csl-json", "CSL-JSON"), ("csv", "CSV"))


def room(settings: MabillonSettings) -> Links | None:
    return Links.at(settings.reading_room.url) if settings.reading_room.url else None


def document_link(settings: MabillonSettings, package: EvidencePackage, doc: EvidenceDocument,
                  lineage_url: str | None = None) -> tuple[str, str] | None:
    """(label, url) of the link shown for a cited document, or None when there is nowhere to go."""
    links = room(settings)
    if links is not None:
        if package.query_id:
            return "evidence in the reading room", links.evidence(package.query_id, doc.rank)
        return "open in the reading room", links.document(doc.doc_id)
    if lineage_url:
        return "lineage", lineage_url
    return None


def answer_links(settings: MabillonSettings, package: EvidencePackage) -> list[tuple[str, str]]:
    """Links for the answer as a whole: its evidence page and IIIF manifest in the reading room."""
    links = room(settings)
    if links is None or not package.query_id:
        return []
    # a manifest only where a citation sits on a page (a box): the room serves none without a
    # canvas, and text records have none
    on_pages = any(span.bbox for doc in package.documents for span in doc.evidence)
    return [("evidence of this answer in the reading room", links.evidence(package.query_id)),
            *([("IIIF manifest", links.query_manifest(package.query_id))] if on_pages else []),
            *((f"references ({label})", links.export_query(fmt, package.query_id))
              for fmt, label in EXPORTS)]
