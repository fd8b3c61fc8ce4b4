"""Links from Prefect's ask artifact into the reading room."""
from __future__ import annotations

from flows.artifacts.links import answer_links, document_link
from schemas.query import Cost, EvidenceDocument, EvidencePackage, EvidenceSpan
from schemas.settings import MabillonSettings, ReadingRoomSettings
from tasks.reading.links import Links


def settings(url: str | None) -> MabillonSettings:
    return MabillonSettings(reading_room=ReadingRoomSettings(url=url))


def package(query_id: str | None, box: list[float] | None = None) -> EvidencePackage:
    span = EvidenceSpan(chunk_id="c", page=1, bbox=box, char_start=0, char_end=4, text="mots")
    docs = [EvidenceDocument(doc_id=d, rank=n, corpus=None, date=None, revision=None, digest=None,
                             status="accepted", confirmations=1, evidence=[span])
            for n, d in enumerate(["a/one", "b/two"], 1)]
    return EvidencePackage(question="q?", generation="g0001", space_id="s", provider="rules",
                           documents=docs, accepted=[], held=[], rejected=[], rejected_docs=[],
                           retrieved=[], plan=[], briefings=[], flags=[], cost=Cost(), query_id=query_id)


def test_each_document_links_to_its_place_on_the_evidence_page():
    p, room = package("20260101T000000-abcdef12-123456", [10, 20, 300, 80]), settings("http://room:4300/")
    urls = [document_link(room, p, d, "http://prefect/lineage")[1] for d in p.documents]
    assert urls == ["http://room:4300/queries/20260101T000000-abcdef12-123456#doc-1",
                    "http://room:4300/queries/20260101T000000-abcdef12-123456#doc-2"]
    assert ("IIIF manifest", "http://room:4300/iiif/query/20260101T000000-abcdef12-123456/manifest"
            ) in answer_links(room, p)


def test_an_answer_citing_no_page_links_no_manifest():
    # text records have no canvas, and the room serves no manifest without one
    labels = [label for label, _ in answer_links(settings("http://room:4300"), package("q-1"))]
    assert "IIIF manifest" not in labels and labels[0] == "evidence of this answer in the reading room"


def test_without_a_reading_room_documents_link_to_the_lineage():
    p = package("x")
    assert document_link(settings(None), p, p.documents[0], "http://prefect/lineage") == (
        "lineage", "http://prefect/lineage")
    assert document_link(settings(None), p, p.documents[0]) is None
    assert answer_links(settings(None), p) == []


def test_an_answer_without_a_record_links_to_the_document_page():
    p = package(None)
    assert document_link(settings("http://room:4300"), p, p.documents[1])[1] == (
        "http://room:4300/documents/b/two")
    assert answer_links(settings("http://room:4300"), p) == []


def test_addresses_keep_document_ids_readable_and_escape_the_rest():
    links = Links.at("http://room/")
    assert links.document("presse/courrier 1902#2") == "http://room/documents/presse/courrier%201902%232"
    assert links.image("r1", 3, "0,0,10,10", "5,") == "http://room/iiif/3/r1-p0003/0,0,10,10/5,/0/default.jpg"


def test_a_past_view_keeps_its_time_in_the_path_of_iiif_and_the_query_of_pages():
    links = Links.at("http://room/", "2000-06-01T00:00:00+00:00")
    at = "http://room/at/2000-06-01T00%3A00%3A00%2B00%3A00"
    assert links.image_service("r1", 3) == f"{at}/iiif/3/r1-p0003"
    assert links.image("r1", 3) == f"{at}/iiif/3/r1-p0003/full/max/0/default.jpg"
    assert links.manifest("r1") == f"{at}/iiif/manifest/r1"
    assert links.document("a/b") == "http://room/documents/a/b?as_of=2000-06-01T00%3A00%3A00%2B00%3A00"
    assert links.evidence("q1", 2) == "http://room/queries/q1?as_of=2000-06-01T00%3A00%3A00%2B00%3A00#doc-2"
    assert Links.at("http://room/").manifest("r1") == "http://room/iiif/manifest/r1"


def test_a_content_state_round_trips_and_names_the_canvas_box_and_manifest():
    from tasks.reading.content_state import content_state, decode_content_state, encode_content_state
    from tasks.reading.links import IIIF_VIEWER, xywh

    links = Links.at("http://room/")
    region = xywh((10.4, 20.0, 110.6, 45.2))
    assert region == "10,20,101,25"
    state = content_state(links.manifest("r1"), links.canvas("r1", 2), region)
    encoded = encode_content_state(state)
    assert set(encoded) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    decoded = decode_content_state(encoded)
    assert decoded == state and decoded["motivation"] == ["contentState"]
    assert decoded["target"]["id"] == "http://room/iiif/canvas/r1/p2#xywh=10,20,101,25"
    assert decoded["target"]["partOf"] == [{"id": "http://room/iiif/manifest/r1", "type": "Manifest"}]
    assert links.viewer(encoded) == IIIF_VIEWER + encoded
    assert links.image_region("r1", 2, (10.4, 20.0, 110.6, 45.2)) == \
        "http://room/iiif/3/r1-p0002#xywh=10,20,101,25"
