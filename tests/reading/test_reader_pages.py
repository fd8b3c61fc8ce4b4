"""The reader's pages over the real sample, through HTTP (ASGI test client): an answer read at a
glance — accepted documents first, the others folded, filters, pages of five; the document list
with a title for every document, search, filters and pages; a document page without server
paths; the 404 that offers to sign in and goes back to where the reader was going."""
from __future__ import annotations

import html as html_lib
import re

import pytest
from fastapi.testclient import TestClient

from flows.reading_room import create_app
from tasks.reading.reader_pages import documents_page
from tasks.reading.listing import ListFilter
from tasks.store.layout import StoreLayout
from tasks.store.query_records import read_query_record
from tests.reading.conftest import (SCAN_DOC, SCAN_QUESTION, TEXT_DOC, TEXT_QUESTION, TOKENS, bearer,
                                    copy_home, settings_of)
from tests.reading.test_room import catalog_of

# what a reader must never read: the loop's own labels, Python's None, the server's paths
INTERNAL = re.compile(r"\bNone\b|file://|\bfused\b|\bbridge\b|too_few_results|\bP 0\.\d|channels agree|rangs :|"
                      r"\b(accepted|retrieved|held|drapeaux|framework|bm25|entity)\b")
SECTION = re.compile(r'<section class="doc" id="doc-(\d+)" data-state="(\w+)" data-status="(\w*)"')


def text_of(page: str) -> str:
    """The words of a page, folds included (stricter than what a browser shows at first)."""
    page = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S)
    page = re.sub(r"<[^>]+>", " ", page)
    return html_lib.unescape(" ".join(page.split()))


def folded_block(page: str) -> str:
    found = re.search(r'<details class="others">(.*?)</details>', page, re.S)
    return found.group(1) if found else ""


def test_an_answer_shows_its_accepted_documents_first_and_folds_the_others(room_client, asked):
    qid = asked[("alice", SCAN_QUESTION)]
    evidence = room_client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
    page = room_client.get(f"/queries/{qid}", headers=bearer("alice")).text
    accepted = [d for d in evidence["documents"] if d["status"] == "accepted"]
    others = [d for d in evidence["documents"] if d["status"] != "accepted"]
    assert accepted and others
    assert [int(rank) for rank, _, _ in SECTION.findall(page)] == [d["rank"] for d in accepted]
    folded = folded_block(page)
    assert sorted(int(r) for r in re.findall(r'<li value="(\d+)"', folded)) == sorted(d["rank"] for d in others)
    assert "<img" not in folded and "<figure" not in folded  # one line each, no crops
    assert page.index('<section class="doc"') < page.index('<details class="others">')
    text = text_of(page)
    assert INTERNAL.search(text) is None, INTERNAL.search(text)
    assert "documents retenus" in text or "document retenu" in text


def test_filters_narrow_an_answer_and_a_bad_one_says_how_to_write_it(room_client, asked):
    qid = asked[("alice", TEXT_QUESTION)]
    evidence = room_client.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
    shown = [d for d in evidence["documents"] if d["state"] != "withdrawn"]

    def ranks(query: str) -> set[int]:
        r = room_client.get(f"/queries/{qid}{query}", headers=bearer("alice"))
        assert r.status_code == 200, r.text
        return ({int(rank) for rank, _, _ in SECTION.findall(r.text)}
                | {int(x) for x in re.findall(r'<li value="(\d+)"', folded_block(r.text))})

    assert ranks("") == {d["rank"] for d in evidence["documents"]}
    assert ranks("?corpus=inventaires") == {d["rank"] for d in shown if d["corpus"] == "inventaires"} != set()
    after_1900 = {d["rank"] for d in shown if d["date"] and d["date"] >= "1900"}
    assert ranks("?date_from=1900") == after_1900 and 0 < len(after_1900) < len(shown)
    assert ranks("?date_from=1887-03&date_to=1887-03") == {d["rank"] for d in shown if (d["date"] or "").startswith("1887-03")}
    only = room_client.get(f"/queries/{qid}?accepted_only=1", headers=bearer("alice")).text
    assert 'class="others"' not in only and SECTION.search(only)
    for bad in ("?date_from=hier", "?date_to=1887-13", "?page=abc", "?page=0", "?date_from=%D9%A1887"):
        r = room_client.get(f"/queries/{qid}{bad}", headers=bearer("alice"))
        assert r.status_code == 400, (bad, r.status_code)
        assert "filtre illisible" in r.text
    assert "1887-03" in room_client.get(f"/queries/{qid}?date_from=hier", headers=bearer("alice")).text


def test_an_answer_runs_over_pages_of_five_accepted_documents(sample_home, asked, tmp_path):
    qid = asked[("alice", SCAN_QUESTION)]
    home = copy_home(sample_home, tmp_path / "home")
    layout = StoreLayout.from_settings(settings_of(home))
    record = read_query_record(layout, qid)
    # a record of our own making: every document of alice's answer accepted
    made = f"{qid}-every-doc"
    docs = [d.model_copy(update={"status": "accepted"}) for d in record.documents]
    (layout.queries / f"{made}.json").write_text(
        record.model_copy(update={"query_id": made, "documents": docs}).model_dump_json(), "utf-8")
    ranks = sorted(d.rank for d in docs)
    with TestClient(create_app(settings_of(home), warm=False)) as client:
        def page(query: str) -> tuple[list[int], str]:
            r = client.get(f"/queries/{made}{query}", headers=bearer("alice"))
            assert r.status_code == 200, r.text
            return [int(x) for x, _, _ in SECTION.findall(r.text)], r.text

        pages = -(-len(ranks) // 5)
        assert pages >= 2
        first, html = page("")
        assert first == ranks[:5] and f"page 1 sur {pages}" in html and 'rel="next" href="?page=2"' in html
        second, html = page("?page=2")
        assert second == ranks[5:10] and 'rel="prev" href="?"' in html and ('rel="next"' in html) == (pages > 2)
        assert page("?page=99")[0] == ranks[5 * (pages - 1):]  # past the last: the last
        dated, html = page("?date_from=1850&page=2")
        expected = sorted(d.rank for d in docs if d.date and d.date >= "1850")
        assert len(expected) > 5  # two pages of dated documents
        assert dated == expected[5:10] and 'href="?date_from=1850"' in html  # paging keeps the filter
        assert "class=\"others\"" not in html


def test_the_document_list_has_a_title_for_every_document_and_a_search(room_client, sample_home):
    catalog = catalog_of(sample_home)
    page = room_client.get("/documents", headers=bearer("alice")).text
    titles = [html_lib.unescape(t) for t in re.findall(r'<tr><td><a href="[^"]+">(.*?)</a><br>', page)]
    visible = [r for r in catalog.revisions.values() if r.tenant in (None, "default")]
    assert len(titles) == len(visible) >= 10
    assert all(t.strip("[] ") for t in titles)
    # the image beside the ALTO has no title but its file name: its first line stands in, in brackets
    assert any(t.startswith("[") and "Courrier" in t for t in titles), titles
    assert INTERNAL.search(text_of(page)) is None

    def found(q: str) -> set[str]:
        r = room_client.get(f"/documents?{q}", headers=bearer("alice"))
        assert r.status_code == 200
        return set(re.findall(r'<span class="meta mono">([^<]+)</span>', r.text))

    assert found("q=vaux+deliberations") == {SCAN_DOC}  # accents and case ignored: "délibérations"
    assert TEXT_DOC in found("q=SAINT-AUBIN")
    assert found("corpus=deliberations") == {r.doc_id for r in visible if r.corpus == "deliberations"}
    assert found("date_from=1900&date_to=1999") == {r.doc_id for r in visible if r.date and "1900" <= r.date[:4] <= "1999"}
    assert "posez une" in room_client.get("/documents?q=zzzz", headers=bearer("alice")).text
    assert room_client.get("/documents?date_to=demain", headers=bearer("alice")).status_code == 400
    # pages: every document once, in order, over the pages
    revisions = [catalog.revisions[r] for r in catalog.current.values() if catalog.revisions[r] in visible]
    pages = [documents_page(catalog, revisions, ListFilter(page=n), per_page=3).rows for n in (1, 2, 3, 4, 5)]
    assert pages[0].pages == -(-len(visible) // 3)
    seen = [row.revision.doc_id for p in pages[:pages[0].pages] for row in p.items]
    assert sorted(seen) == sorted(r.doc_id for r in visible) and len(set(seen)) == len(seen)


def test_the_document_page_names_its_file_but_not_the_server_path(room_client, sample_home):
    catalog = catalog_of(sample_home)
    revision = catalog.revisions[catalog.current[SCAN_DOC]]
    assert revision.uri.startswith("file://")
    page = room_client.get(f"/documents/{SCAN_DOC}", headers=bearer("alice")).text
    assert "file://" not in page and revision.uri.rsplit("/", 1)[1] in page
    assert revision.uri.removeprefix("file://").rsplit("/", 1)[0] not in page
    assert revision.digest in page and INTERNAL.search(text_of(page)) is None


@pytest.mark.parametrize("hostile", ["https://evil.example/queries/x", "//evil.example/x", "/\\evil.example",
                                     "javascript:alert(1)", "/login", "http://testserver.evil/x", "queries/x",
                                     "/ok\r\nSet-Cookie: x=1"])
def test_a_sign_in_goes_back_only_to_a_page_of_this_room(sample_home, hostile):
    with TestClient(create_app(settings_of(sample_home), warm=False)) as client:
        r = client.post("/login", data={"token": TOKENS["alice"], "next": hostile}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/"


def test_a_404_offers_to_sign_in_and_the_sign_in_goes_back_there(sample_home, asked):
    qid = asked[("alice", SCAN_QUESTION)]
    with TestClient(create_app(settings_of(sample_home), warm=False)) as client:
        hidden = client.get(f"/queries/{qid}")
        missing = client.get("/queries/20990101T000000-deadbeef-000000")
        assert hidden.status_code == missing.status_code == 404
        assert hidden.content == missing.content  # the same page: nothing tells them apart
        assert 'action="/login"' in hidden.text and "jeton d'accès" in hidden.text.lower()
        # the form on that page posts from it: the sign-in returns to the evidence
        r = client.post("/login", data={"token": TOKENS["alice"]}, follow_redirects=False,
                        headers={"Referer": f"http://testserver/queries/{qid}"})
        assert r.status_code == 303 and r.headers["location"] == f"/queries/{qid}"
        assert client.get(f"/queries/{qid}").status_code == 200
        # the header's link carries the page it was followed from
        form = client.get("/login?next=/documents%3Fq%3Dvaux").text
        assert 'name="next" value="/documents?q=vaux"' in form
        r = client.post("/login", data={"token": TOKENS["alice"], "next": "/documents?q=vaux"},
                        follow_redirects=False)
        assert r.headers["location"] == "/documents?q=vaux"
