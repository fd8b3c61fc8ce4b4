"""Links from Prefect's ask artifact into the reading room."""
from __future__ import annotations

from schemas.query import Cost, EvidenceDocument, EvidencePackage
from tasks.reading.links import Links, evidence_links_markdown


def package(query_id: str | None) -> EvidencePackage:
    docs = [EvidenceDocument(doc_id=d, rank=n, corpus=None, date=None, revision=None, digest=None,
                             status="accepted", confirmations=1)
            for n, d in enumerate(["a/one", "b/two"], 1)]
    return EvidencePackage(question="q?", generation="g0001", space_id="s", provider="rules",
                           documents=docs, accepted=[], held=[], rejected=[], rejected_docs=[],
                           retrieved=[], plan=[], briefings=[], flags=[], cost=Cost(), query_id=query_id)


def test_each_document_links_to_its_place_on_the_evidence_page():
    md = evidence_links_markdown(package("20260101T000000-abcdef12-123456"), "http://room:4300/")
    assert "[`a/one`](http://room:4300/queries/20260101T000000-abcdef12-123456#doc-1)" in md
    assert "[`b/two`](http://room:4300/queries/20260101T000000-abcdef12-123456#doc-2)" in md
    assert "http://room:4300/iiif/query/20260101T000000-abcdef12-123456/manifest" in md


def test_no_reading_room_or_no_record_means_no_links():
    assert evidence_links_markdown(package("x"), None) == ""
    assert evidence_links_markdown(package(None), "http://room:4300") == ""


def test_addresses_keep_document_ids_readable_and_escape_the_rest():
    links = Links.at("http://room/")
    assert links.document("presse/courrier 1902#2") == "http://room/documents/presse/courrier%201902%232"
    assert links.image("r1", 3, "0,0,10,10", "5,") == "http://room/iiif/3/r1-p0003/0,0,10,10/5,/0/default.jpg"
