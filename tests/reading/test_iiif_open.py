"""Evidence a researcher opens anywhere (issue 34) and ALTO pages delivered without their image
(issue 33 item 6): every citation of a page carries a IIIF Content State that opens a viewer at
the cited box; no manifest has zero canvases (text records get no IIIF link at all); an ALTO-only
page has a canvas of the ALTO page size, painted by the library's image service when the delivery
names one, and on the evidence page its cited words stand at their places on a page-shaped view."""
from __future__ import annotations

import re

from tasks.reading.content_state import decode_content_state
from tasks.reading.links import IIIF_VIEWER
from tests.reading.conftest import (ALTO_ONLY_DOC, ALTO_QUESTION, ALTO_SERVICE, ALTO_SERVICE_DOC,
                                    SCAN_QUESTION, TEXT_DOC, TEXT_QUESTION, bearer)
from tests.reading.test_room import catalog_of, validated

ALTO_PAGE = (2480, 3508)  # flows.make_sample.alto_xml's page, in ALTO pixels


def annotations_of(manifest: dict) -> list[dict]:
    return [a for canvas in manifest["items"] for page in canvas.get("annotations", []) for a in page["items"]]


def test_each_cited_box_opens_in_a_viewer_through_a_content_state(room_client, sample_home, asked):
    qid = asked[("alice", SCAN_QUESTION)]
    evidence = room_client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
    manifest = room_client.get(f"/iiif/query/{qid}/manifest", headers=bearer("alice")).json()
    boxes = {a["target"] for a in annotations_of(manifest)}
    cited = [c for d in evidence["documents"] if d["state"] == "shown" for c in d["citations"]
             if c["kind"] == "image" and c["words"]]
    assert cited
    for c in cited:
        state = decode_content_state(c["content_state"])
        target = state["target"]
        assert state["motivation"] == ["contentState"] and target["type"] == "Canvas"
        assert target["id"] == f"{c['canvas_id']}#xywh={c['region']}" in boxes  # the query's own box
        # the document's manifest (a colleague may see it, never someone else's question)
        [part] = target["partOf"]
        canvases = room_client.get(part["id"].removeprefix("http://testserver")).json()["items"]
        assert c["canvas_id"] in {canvas["id"] for canvas in canvases}
        assert c["viewer_url"] == IIIF_VIEWER + c["content_state"]
        # the page's image address: this room's, or the library's for an ALTO-only delivery
        assert c["region_url"].endswith(f"#xywh={c['region']}")
        assert "/iiif/3/" in c["region_url"] or c["region_url"].startswith(ALTO_SERVICE)
    html = room_client.get(f"/queries/{qid}", headers=bearer("alice")).text
    assert 'class="iiif-viewer"' in html
    # the annotations say why, in words a viewer lists
    assert all(a["motivation"] == "commenting" and a["body"]["value"].startswith("#")
               for a in annotations_of(manifest))


def test_text_records_get_no_iiif_link_and_no_manifest_with_zero_canvases(room_client, sample_home, asked):
    catalog = catalog_of(sample_home)
    text_revision = catalog.current[TEXT_DOC]
    refused = room_client.get(f"/iiif/manifest/{text_revision}")
    assert refused.status_code == 404 and "no page images" in refused.json()["error"]
    qid = asked[("alice", TEXT_QUESTION)]
    evidence = room_client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
    for d in evidence["documents"]:
        if d["state"] == "shown" and all(c["kind"] == "text" for c in d["citations"]):
            revision = catalog.revisions[d["current_revision"]]
            if revision.media_type in ("text/plain", "text/html", "application/vnd.mabillon.record+json"):
                assert d["manifest_url"] is None
    query_manifest = room_client.get(f"/iiif/query/{qid}/manifest", headers=bearer("alice"))
    if evidence["manifest"] is None:
        assert query_manifest.status_code == 404 and "no page image" in query_manifest.json()["error"]
    else:
        assert validated(query_manifest.json()).items
    html = room_client.get(f"/documents/{TEXT_DOC}").text
    assert "/iiif/manifest/" not in html


def test_an_alto_page_without_image_has_a_canvas_of_its_size_and_no_pixels_here(room_client, sample_home):
    catalog = catalog_of(sample_home)
    alone, served = catalog.current[ALTO_ONLY_DOC], catalog.current[ALTO_SERVICE_DOC]
    assert room_client.get(f"/iiif/3/{alone}-p0001/info.json").status_code == 404
    body = room_client.get(f"/iiif/manifest/{alone}").json()
    validated(body)
    [canvas] = body["items"]
    assert (canvas["width"], canvas["height"]) == ALTO_PAGE
    assert not canvas.get("items")  # painted by nothing: no broken image
    boxes = [a["target"] for a in canvas["annotations"][0]["items"]]
    assert boxes and all(re.search(r"#xywh=\d+,\d+,\d+,\d+$", b) for b in boxes)
    # the delivery named the library's image service for its page: the canvas is painted by it
    body = room_client.get(f"/iiif/manifest/{served}").json()
    validated(body)
    [canvas] = body["items"]
    assert (canvas["width"], canvas["height"]) == ALTO_PAGE
    painting = canvas["items"][0]["items"][0]
    assert painting["motivation"] == "painting" and painting["body"]["id"].startswith(ALTO_SERVICE + "/full/")
    assert painting["body"]["service"][0]["id"] == ALTO_SERVICE


def test_an_alto_only_citation_shows_its_words_at_their_places(room_client, sample_home):
    r = room_client.post("/ask", data={"question": ALTO_QUESTION}, headers=bearer("alice"),
                         follow_redirects=False)
    assert r.status_code == 303, r.text
    qid = r.headers["location"].rsplit("/", 1)[1]
    evidence = room_client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
    top = next(d for d in evidence["documents"] if d.get("doc_id") == ALTO_ONLY_DOC)
    [citation] = [c for c in top["citations"] if c["kind"] == "page-text"]
    assert citation["crop_url"] is None and citation["words"] and citation["context_words"]
    cited = {w["label"] for w in citation["words"]}
    assert {"lavoir", "communal"} <= cited
    crop = citation["crop"]
    assert all(0 <= w["x"] and w["x"] + w["w"] <= crop["w"] + 1 for w in citation["context_words"])
    html = room_client.get(f"/queries/{qid}", headers=bearer("alice")).text
    section = html[html.index(f'/documents/{ALTO_ONLY_DOC}"'):]
    section = section[:section.index("</section>")]
    assert 'class="page-text"' in section and "<img" not in section
    assert ">lavoir</span>" in section and 'class="cited"' in section
    # its query manifest has the ALTO page as canvas, with the cited box on it
    manifest = room_client.get(f"/iiif/query/{qid}/manifest", headers=bearer("alice")).json()
    validated(manifest)
    canvas = next(c for c in manifest["items"] if catalog_of(sample_home).current[ALTO_ONLY_DOC] in c["id"])
    assert (canvas["width"], canvas["height"]) == ALTO_PAGE
    assert any(a["target"] == f"{canvas['id']}#xywh={citation['region']}" for a in annotations_of(manifest))
