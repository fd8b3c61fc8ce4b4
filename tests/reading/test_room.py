"""The reading room over a real ingested sample, through its HTTP interface (ASGI test client):
IIIF sizes per the specification, manifests that validate, evidence and document pages, and
authorization on every request."""
from __future__ import annotations

import io
import json
import re

import pytest
from iiif_prezi3 import Manifest
from PIL import Image

from schemas.settings import MabillonSettings
from tasks.reading.catalog import Catalog
from tasks.store.layout import StoreLayout
from tasks.store.routing import read_routing
from tests.reading.conftest import (SCAN_DOC, SCAN_QUESTION, TENANT_B_DOC, TEXT_DOC, TEXT_QUESTION,
                                    bearer, copy_home, settings_of, write_principals, PRINCIPALS)


def catalog_of(home) -> Catalog:
    layout = StoreLayout.from_settings(MabillonSettings(home=home))
    return Catalog.load(layout, read_routing(layout).serving)


def revision_of(home, doc_id: str) -> str:
    return catalog_of(home).current[doc_id]


def image_id(home, doc_id: str, page: int = 1) -> str:
    return f"{revision_of(home, doc_id)}-p{page:04d}"


def pixels(response) -> Image.Image:
    assert response.status_code == 200, response.text
    return Image.open(io.BytesIO(response.content))


# ---- IIIF Image API --------------------------------------------------------------------------

def test_info_json_says_what_the_specification_asks(room_client, sample_home):
    ident = image_id(sample_home, SCAN_DOC)
    info = room_client.get(f"/iiif/3/{ident}/info.json").json()
    assert info["@context"] == "http://iiif.io/api/image/3/context.json"
    assert info["id"] == f"http://testserver/iiif/3/{ident}"
    assert (info["type"], info["protocol"], info["profile"]) == ("ImageService3", "http://iiif.io/api/image", "level2")
    page = catalog_of(sample_home).page(revision_of(sample_home, SCAN_DOC), 1)
    assert (info["width"], info["height"]) == (round(page.width), round(page.height))
    assert info["maxArea"] == 12_000_000 and "png" in info["extraFormats"]
    assert {"regionByPct", "sizeByPct", "sizeByConfinedWh", "sizeByWh"} <= set(info["extraFeatures"])
    for size in info["sizes"]:  # every listed size is served at exactly that size
        got = pixels(room_client.get(f"/iiif/3/{ident}/full/{size['width']},{size['height']}/0/default.jpg"))
        assert got.size == (size["width"], size["height"])
    ld = room_client.get(f"/iiif/3/{ident}/info.json", headers={"Accept": "application/ld+json"})
    assert ld.headers["content-type"].startswith("application/ld+json")
    assert 'profile="http://iiif.io/api/image/3/context.json"' in ld.headers["content-type"]
    assert ld.headers["access-control-allow-origin"] == "*"
    base = room_client.get(f"/iiif/3/{ident}", follow_redirects=False)
    assert base.status_code == 303 and base.headers["location"].endswith(f"/iiif/3/{ident}/info.json")


def test_region_and_size_requests_return_the_sizes_the_specification_gives(room_client, sample_home):
    ident = image_id(sample_home, SCAN_DOC)
    info = room_client.get(f"/iiif/3/{ident}/info.json").json()
    w, h = info["width"], info["height"]
    cases = {
        "full/max": (w, h),
        "full/400,": (400, round(h * 400 / w)),
        "full/,300": (round(w * 300 / h), 300),
        "full/pct:25": (round(w / 4), round(h / 4)),
        "full/!300,300": (round(w * 300 / h), 300),
        "full/120,80": (120, 80),
        "100,200,640,480/max": (640, 480),
        "100,200,640,480/320,": (320, 240),
        f"{w - 50},{h - 40},500,500/max": (50, 40),  # cropped at the image's edge
        "pct:0,0,50,50/max": (w // 2, round(h / 2 + 0.5)),
        "square/200,": (200, 200),
        "0,0,100,100/^200,": (200, 200),
    }
    for path, size in cases.items():
        got = pixels(room_client.get(f"/iiif/3/{ident}/{path}/0/default.jpg"))
        assert got.size == size, path
        assert got.format == "JPEG"
    png = pixels(room_client.get(f"/iiif/3/{ident}/0,0,64,64/max/0/default.png"))
    assert png.format == "PNG" and png.size == (64, 64)


def test_renders_are_deterministic_and_cached_by_request(room_client, sample_home):
    room = room_client.app.state.room
    ident = image_id(sample_home, SCAN_DOC)
    url = f"/iiif/3/{ident}/10,10,300,200/150,/0/default.png"
    first = room_client.get(url).content
    hits = room.renderer.hits
    assert room_client.get(url).content == first
    assert room.renderer.hits == hits + 1
    # the same pixels rendered afresh (no cache) are the same bytes: renders are deterministic
    room.renderer.forget(set())
    assert room_client.get(url).content == first


@pytest.mark.parametrize("path", [
    "-1,0,10,10/max", "0,0,0,10/max", "0,0,10,0/max", "99999,0,10,10/max", "a,b,c,d/max",
    "full/0,", "full/,0", "full/-5,", "full/abc", "full/pct:0", "full/pct:101", "full/99999,",
    "full/10", "pct:200,0,10,10/max",
])
def test_bad_region_or_size_is_a_400_that_says_why(room_client, sample_home, path):
    r = room_client.get(f"/iiif/3/{image_id(sample_home, SCAN_DOC)}/{path}/0/default.jpg")
    assert r.status_code == 400
    assert r.json()["error"] and ("region" in r.json()["error"] or "size" in r.json()["error"])


def test_a_path_outside_the_service_is_never_a_file(room_client, sample_home):
    ident = image_id(sample_home, SCAN_DOC)
    for path in (f"/iiif/3/{ident}/..%2F..%2F..%2Fprincipals.json/max/0/default.jpg",
                 f"/iiif/3/..%2Fprincipals.json/info.json", "/iiif/3/%2E%2E/info.json",
                 f"/iiif/3/{ident}/full/max/0/..%2F..%2Fetc%2Fpasswd", "/queries/..%2Fprincipals",
                 "/iiif/manifest/..%2F..%2Froutingjson", "/documents/../../principals.json"):
        r = room_client.get(path)
        assert r.status_code in (400, 404), path
        assert "token_sha256" not in r.text and "serving" not in r.text


def test_the_pixel_limit_bounds_every_request_with_a_400_naming_it(sample_home):
    from fastapi.testclient import TestClient

    from flows.reading_room import create_app

    with TestClient(create_app(settings_of(sample_home, max_pixels=500_000), warm=False)) as client:
        ident = image_id(sample_home, SCAN_DOC)
        info = client.get(f"/iiif/3/{ident}/info.json").json()
        assert info["maxArea"] == 500_000
        got = pixels(client.get(f"/iiif/3/{ident}/full/max/0/default.jpg"))
        assert got.width * got.height <= 500_000  # max: the largest size the limit allows
        refused = client.get(f"/iiif/3/{ident}/full/1500,/0/default.jpg")
        assert refused.status_code == 400
        assert "max_pixels" in refused.json()["error"] and "500,000" in refused.json()["error"]
        assert client.get(f"/iiif/3/{ident}/full/^max/0/default.jpg").status_code == 200


def test_unsupported_but_valid_requests_are_501(room_client, sample_home):
    ident = image_id(sample_home, SCAN_DOC)
    assert room_client.get(f"/iiif/3/{ident}/full/max/22.5/default.jpg").status_code == 501
    assert room_client.get(f"/iiif/3/{ident}/full/max/0/default.tif").status_code == 501


def test_a_turned_gray_request_is_served_with_its_canonical_link(room_client, sample_home):
    ident = image_id(sample_home, SCAN_DOC)
    info = room_client.get(f"/iiif/3/{ident}/info.json").json()
    r = room_client.get(f"/iiif/3/{ident}/full/200,/90/gray.png")
    assert r.status_code == 200
    turned = Image.open(io.BytesIO(r.content))
    tall = round(200 * info["height"] / info["width"])
    assert turned.mode == "L" and turned.size == (tall, 200)  # 200 wide before the quarter turn
    assert f'<http://testserver/iiif/3/{ident}/full/200,{tall}/90/gray.png>;rel="canonical"' \
        in r.headers["link"]


def test_every_page_bearing_format_has_an_image_service_and_text_formats_none(room_client, sample_home):
    catalog = catalog_of(sample_home)
    served = {}
    for doc_id, revision_id in catalog.current.items():
        if doc_id.startswith("livraison-alto/"):  # ALTO without its image: tests/reading/test_iiif_open.py
            continue
        r = room_client.get(f"/iiif/3/{revision_id}-p0001/info.json")
        served[catalog.revisions[revision_id].media_type] = r.status_code
    assert served["image/png"] == served["image/jpeg"] == served["image/tiff"] == 200
    assert served["application/pdf"] == 200  # digital and scanned
    assert served["application/alto+xml"] == 200  # its page image was ingested beside it
    assert served["text/html"] == served["text/plain"] == 404
    assert served["application/vnd.mabillon.record+json"] == 404


def test_an_alto_page_is_painted_by_its_image_at_that_image_size(room_client, sample_home):
    catalog = catalog_of(sample_home)
    alto = catalog.current["presse/courrier-longny-1902-11-15"]
    image = next(r.revision_id for r in catalog.revisions.values()
                 if r.uri.endswith("/courrier-canton-1902.png"))
    alto_info = room_client.get(f"/iiif/3/{alto}-p0001/info.json").json()
    image_page = catalog.page(image, 1)
    assert (alto_info["width"], alto_info["height"]) == (round(image_page.width), round(image_page.height))


# ---- manifests -------------------------------------------------------------------------------

def validated(body: dict) -> Manifest:
    """iiif-prezi3's own models (generated from the Presentation 3 JSON Schema) validate it."""
    assert body["@context"] == "http://iiif.io/api/presentation/3/context.json"
    return Manifest(**{k: v for k, v in body.items() if k != "@context"})


def test_a_revision_manifest_has_a_canvas_per_page_lineage_and_chunk_boxes(room_client, sample_home):
    catalog = catalog_of(sample_home)
    revision_id = catalog.current[SCAN_DOC]
    body = room_client.get(f"/iiif/manifest/{revision_id}").json()
    validated(body)
    metadata = {m["label"]["en"][0]: m["value"]["none"][0] for m in body["metadata"]}
    revision = catalog.revisions[revision_id]
    assert metadata["revision"] == revision_id and metadata["sha256"] == revision.digest
    assert metadata["source"] == revision.source_id and "tesseract" in metadata["parser"]
    [canvas] = body["items"]
    painting = canvas["items"][0]["items"][0]
    assert painting["motivation"] == "painting" and painting["target"] == canvas["id"]
    service = painting["body"]["service"][0]
    assert service["type"] == "ImageService3" and service["profile"] == "level2"
    info = room_client.get(service["id"].removeprefix("http://testserver") + "/info.json").json()
    assert (canvas["width"], canvas["height"]) == (info["width"], info["height"])
    annotations = canvas["annotations"][0]["items"]
    assert len(annotations) == len(catalog.chunks(revision_id)) >= 3
    for a in annotations:
        x, y, w, h = map(int, re.search(r"#xywh=(\d+),(\d+),(\d+),(\d+)$", a["target"]).groups())
        assert a["target"].startswith(canvas["id"]) and x + w <= canvas["width"] and y + h <= canvas["height"]


def test_a_digital_pdf_has_a_manifest_and_its_text_layer_words_line_up(room_client, sample_home):
    from tasks.reading.words import page_words
    from tasks.store.blobs import read_blob

    catalog = catalog_of(sample_home)
    revision_id = catalog.current["correspondance/prefet-orne-1871-02-03"]
    validated(room_client.get(f"/iiif/manifest/{revision_id}").json())
    page = catalog.page(revision_id, 1)
    revision = catalog.revisions[revision_id]
    words = page_words(page, catalog.elements(revision_id)[1], revision.media_type,
                       read_blob(StoreLayout.from_settings(MabillonSettings(home=sample_home)), revision.digest))
    assert len(words) > 50
    assert all(w.text == page.raw_text[w.char_start:w.char_end] for w in words)
    assert sum(len(w.text) for w in words) > 0.8 * len(page.raw_text.replace(" ", "").replace("\n", ""))


def test_a_query_manifest_adds_one_annotation_per_citation_on_the_cited_words(room_client, sample_home, asked):
    qid = asked[("alice", SCAN_QUESTION)]
    body = room_client.get(f"/iiif/query/{qid}/manifest", headers=bearer("alice")).json()
    validated(body)
    evidence = room_client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
    cited = [(d, c) for d in evidence["documents"] if d["state"] == "shown"
             for c in d["citations"] if c["kind"] != "text"]  # a scan's, or an ALTO page's
    annotations = [a for canvas in body["items"] for page in canvas.get("annotations", [])
                   for a in page["items"]]
    assert len(annotations) == len(cited) >= 1
    assert all(a["motivation"] == "commenting" for a in annotations)  # listed by a viewer
    first_doc, first = cited[0]
    x0 = min(first["crop"]["x"] + r["x"] for r in first["words"])
    assert f"#xywh={int(x0)}," in annotations[0]["target"]
    from tasks.reading.wording import plain_why

    # the body says why in the reader's words, as the evidence page does, not the judge's labels
    said = annotations[0]["body"]["value"]
    assert plain_why(first_doc["rationales"], first_doc["confirmations"]) in said
    assert first_doc["rationales"][0] not in said


# ---- evidence pages ------------------------------------------------------------------------

def test_the_scan_question_cites_the_scanned_page_with_word_boxes(room_client, sample_home, asked):
    qid = asked[("alice", SCAN_QUESTION)]
    evidence = room_client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
    top = evidence["documents"][0]
    assert top["doc_id"] == SCAN_DOC and top["state"] == "shown" and top["status"] == "accepted"
    citation = top["citations"][0]
    assert citation["kind"] == "image" and citation["words"]
    catalog = catalog_of(sample_home)
    revision_id = catalog.current[SCAN_DOC]
    page = catalog.page(revision_id, 1)
    chunks = catalog.chunks(revision_id)
    assert len(chunks) >= 3  # the page holds several chunks: the citation is only part of it
    words = [e for e in catalog.elements(revision_id)[1] if e.kind == "word"]
    start, end = citation["char_start"] - page.offset, citation["char_end"] - page.offset
    expected = [w for w in words if w.char_start < end and w.char_end > start]
    assert [r["label"] for r in citation["words"]] == [page.raw_text[w.char_start:w.char_end] for w in expected]
    assert len(expected) < len(words)
    html = room_client.get(f"/queries/{qid}", headers=bearer("alice")).text
    assert citation["crop_url"].replace("&", "&amp;") in html
    # why it was retained, in a reader's French; the judge's own cues stay in the JSON
    from tasks.reading.wording import plain_why

    why = plain_why(top["rationales"], top["confirmations"])
    assert why and why.replace("'", "&#39;") in html and top["rationales"][0] not in html


def test_a_text_format_shows_the_cited_span_found_by_its_offsets(room_client, sample_home, asked):
    qid = asked[("alice", TEXT_QUESTION)]
    evidence = room_client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
    top = next(d for d in evidence["documents"] if d["state"] == "shown" and d["doc_id"] == TEXT_DOC)
    citation = top["citations"][0]
    catalog = catalog_of(sample_home)
    raw = catalog.raw_text(catalog.current[TEXT_DOC])
    assert citation["kind"] == "text"
    assert citation["cited_text"] == raw[citation["char_start"]:citation["char_end"]]
    html = room_client.get(f"/queries/{qid}", headers=bearer("alice")).text
    marked = re.search(r'<mark class="cited">(.*?)</mark>', html, re.S).group(1)
    import html as html_lib

    assert html_lib.unescape(marked) == citation["cited_text"]


def test_the_package_and_the_record_carry_the_query_id(room_client, asked, sample_home):
    from tasks.store.query_records import read_query_record

    qid = asked[("alice", SCAN_QUESTION)]
    record = read_query_record(StoreLayout.from_settings(MabillonSettings(home=sample_home)), qid)
    assert record.query_id == qid and record.documents and record.principal.principal_id == "alice"
    r = room_client.post("/api/ask", json={"question": SCAN_QUESTION}, headers=bearer("alice"))
    assert r.status_code == 200 and r.json()["query_id"]
    assert room_client.get(f"/queries/{r.json()['query_id']}", headers=bearer("alice")).status_code == 200


def test_the_document_page_lays_every_chunk_over_the_page(room_client, sample_home):
    html = room_client.get(f"/documents/{SCAN_DOC}").text
    catalog = catalog_of(sample_home)
    revision_id = catalog.current[SCAN_DOC]
    n_chunks = len(catalog.chunks(revision_id))
    drawn = {int(g) for g in re.findall(r'<rect class="chunk-box" data-chunk="(\d+)"', html)}
    assert drawn == set(range(n_chunks))
    assert catalog.revisions[revision_id].digest in html
    text_page = room_client.get(f"/documents/{TEXT_DOC}").text
    assert len(set(re.findall(r'<span data-chunk="(\d+)"', text_page))) == len(
        catalog.chunks(catalog.current[TEXT_DOC]))


# ---- authorization -----------------------------------------------------------------------------

def test_another_tenant_gets_404_for_the_image_manifest_evidence_and_document(room_client, sample_home, asked):
    qid = asked[("alice", SCAN_QUESTION)]
    revision_id = revision_of(sample_home, SCAN_DOC)
    urls = [f"/iiif/3/{revision_id}-p0001/info.json", f"/iiif/3/{revision_id}-p0001/full/max/0/default.jpg",
            f"/iiif/3/{revision_id}-p0001", f"/iiif/manifest/{revision_id}", f"/queries/{qid}",
            f"/api/queries/{qid}", f"/iiif/query/{qid}/manifest", f"/documents/{SCAN_DOC}"]
    for url in urls:
        assert room_client.get(url, headers=bearer("alice")).status_code == 200, url
        seen = room_client.get(url, headers=bearer("bob"), follow_redirects=False)
        missing = room_client.get(url.replace(revision_id, "r0000000000000000dead").replace(qid, "20990101T000000-deadbeef-000000")
                                  .replace(SCAN_DOC, "no/such/document"), headers=bearer("alice"),
                                  follow_redirects=False)
        assert seen.status_code == missing.status_code == 404, url
        assert seen.content == missing.content  # indistinguishable from what does not exist
    # and tenant B's own document is not there for tenant A
    b_revision = revision_of(sample_home, TENANT_B_DOC)
    assert room_client.get(f"/documents/{TENANT_B_DOC}", headers=bearer("bob")).status_code == 200
    assert room_client.get(f"/documents/{TENANT_B_DOC}", headers=bearer("alice")).status_code == 404
    assert room_client.get(f"/iiif/manifest/{b_revision}", headers=bearer("alice")).status_code == 404
    assert TENANT_B_DOC not in room_client.get("/documents", headers=bearer("alice")).text
    # a bad region on something not visible is still 404: authorization comes first
    assert room_client.get(f"/iiif/3/{revision_id}-p0001/-1,0,0,0/0,/0/default.jpg",
                           headers=bearer("bob")).status_code == 404


def test_query_records_are_listed_only_to_who_asked(room_client, asked):
    alice = {r["query_id"] for r in room_client.get("/api/queries", headers=bearer("alice")).json()}
    bob = {r["query_id"] for r in room_client.get("/api/queries", headers=bearer("bob")).json()}
    default = {r["query_id"] for r in room_client.get("/api/queries").json()}
    assert asked[("alice", SCAN_QUESTION)] in alice and asked[("bob", SCAN_QUESTION)] in bob
    assert not alice & bob and not default & (alice | bob)
    home = room_client.get("/", headers=bearer("bob")).text
    assert asked[("alice", SCAN_QUESTION)] not in home and asked[("bob", SCAN_QUESTION)] in home
    # a principal of the same tenant does not see another's record either
    carol = room_client.get(f"/queries/{asked[('alice', SCAN_QUESTION)]}", headers=bearer("carol"))
    assert carol.status_code == 404


def test_bobs_answer_never_cites_tenant_a(room_client, asked):
    evidence = room_client.get(f"/api/queries/{asked[('bob', SCAN_QUESTION)]}", headers=bearer("bob")).json()
    assert {d["doc_id"] for d in evidence["documents"] if d["state"] == "shown"} == {TENANT_B_DOC}


def test_a_wrong_token_is_refused_with_one_message(room_client, sample_home):
    for headers in ({"Authorization": "Bearer nope"}, {"Authorization": "Basic YWxpY2U6eA=="},
                    {"Authorization": "Bearer "}):
        r = room_client.get(f"/documents/{SCAN_DOC}", headers=headers)
        assert r.status_code == 401 and "invalid access token" in r.text
        assert "alice" not in r.text and "principals.json" not in r.text
    from fastapi.testclient import TestClient

    with TestClient(room_client.app, cookies={"mabillon_session": "wrong"}) as client:
        assert client.get(f"/iiif/3/{image_id(sample_home, SCAN_DOC)}/info.json").status_code == 401


def test_the_sign_in_cookie_holds_a_session_id_not_the_token(sample_home):
    from fastapi.testclient import TestClient

    from flows.reading_room import create_app
    from tests.reading.conftest import TOKENS

    with TestClient(create_app(settings_of(sample_home), warm=False)) as client:
        assert client.post("/login", data={"token": "wrong"}).status_code == 401
        r = client.post("/login", data={"token": TOKENS["bob"]}, follow_redirects=False)
        assert r.status_code == 303 and "httponly" in r.headers["set-cookie"].lower()
        assert "samesite=strict" in r.headers["set-cookie"].lower()
        assert TOKENS["bob"] not in r.headers["set-cookie"]
        assert client.get(f"/documents/{TENANT_B_DOC}").status_code == 200
        assert client.get(f"/documents/{SCAN_DOC}").status_code == 404


def test_the_trusted_header_is_off_by_default_and_fails_closed_when_on(room_client, sample_home):
    from fastapi.testclient import TestClient

    from flows.reading_room import create_app

    # off: a header anyone can send names no one
    assert room_client.get(f"/documents/{TENANT_B_DOC}", headers={"X-Remote-User": "bob"}).status_code == 404
    with TestClient(create_app(settings_of(sample_home, trusted_header="X-Remote-User"), warm=False)) as client:
        assert client.get(f"/documents/{TENANT_B_DOC}", headers={"X-Remote-User": "bob"}).status_code == 200
        assert client.get(f"/documents/{SCAN_DOC}", headers={"X-Remote-User": "bob"}).status_code == 404
        assert client.get(f"/documents/{SCAN_DOC}").status_code == 401  # behind the proxy, no default
        assert client.get(f"/documents/{SCAN_DOC}", headers={"X-Remote-User": "mallory"}).status_code == 401


def test_a_document_no_longer_allowed_or_tombstoned_is_withdrawn_now(room_client, sample_home, asked, tmp_path):
    from fastapi.testclient import TestClient

    from flows.reading_room import create_app
    from tasks.store.tombstones import add_tombstones

    qid = asked[("alice", SCAN_QUESTION)]
    home = copy_home(sample_home, tmp_path / "home")
    with TestClient(create_app(settings_of(home), warm=False)) as client:
        revision_id = revision_of(home, SCAN_DOC)
        before = client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
        assert before["documents"][0]["state"] == "shown"
        # alice loses the group: the same record now shows nothing of what she may not read
        write_principals(home, {**PRINCIPALS, "alice": {"tenant": "default", "groups": ["staff"]}})
        after = client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
        assert all(d["state"] == "withdrawn" for d in after["documents"])
        assert client.get(f"/iiif/3/{revision_id}-p0001/full/max/0/default.jpg",
                          headers=bearer("alice")).status_code == 404
        write_principals(home, PRINCIPALS)
        # a tombstone, before any purge: withdrawn at once, image and manifest gone
        add_tombstones(StoreLayout.from_settings(MabillonSettings(home=home)), [SCAN_DOC], "test", "rights")
        after = client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
        top = after["documents"][0]
        assert top == {**top, "state": "withdrawn", "doc_id": "", "citations": [], "rationales": []}
        html = client.get(f"/queries/{qid}", headers=bearer("alice")).text
        assert "Morin" not in html and revision_id not in html and SCAN_DOC not in html
        assert client.get(f"/iiif/3/{revision_id}-p0001/info.json", headers=bearer("alice")).status_code == 404
        assert client.get(f"/iiif/manifest/{revision_id}", headers=bearer("alice")).status_code == 404
        manifest = client.get(f"/iiif/query/{qid}/manifest", headers=bearer("alice"))
        assert revision_id not in manifest.text
        # nothing left to show: no manifest with zero canvases, but a 404 that says so
        assert manifest.status_code == 200 or "no page image" in manifest.json()["error"]


def test_a_citation_of_a_superseded_revision_points_to_the_current_one(room_client, sample_home, asked, tmp_path):
    from fastapi.testclient import TestClient

    from flows.reading_room import create_app
    from flows.release import release
    from tests.conftest import write_records

    qid = asked[("alice", TEXT_QUESTION)]
    home = copy_home(sample_home, tmp_path / "home")
    cited = room_client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
    doc = next(d for d in cited["documents"] if d["doc_id"] == TEXT_DOC)
    # the same document, new bytes: a new revision serves
    new = write_records(tmp_path / "v2.jsonl", [{"doc_id": TEXT_DOC, "corpus": "deliberations",
                                                 "text": "Procès-verbal corrigé : le conseil vote la toiture."}])
    release(paths=[str(new)], settings=settings_of(home))
    with TestClient(create_app(settings_of(home), warm=False)) as client:
        after = client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
        now = next(d for d in after["documents"] if d["rank"] == doc["rank"])
        assert now["state"] == "superseded" and now["citations"] == []
        assert now["current_revision"] != doc["revision"] and now["revision"] == doc["revision"]
        assert client.get(f"/documents/{TEXT_DOC}", headers=bearer("alice")).status_code == 200
