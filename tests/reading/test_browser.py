"""The reading room in headless Debian chromium, served by `mabillon reading-room` itself:
a question asked in its box lands on its evidence page, where the highlight covers the cited
words of the scanned page and nothing else (checked with pixels); another tenant gets 404;
a document deleted afterwards is shown withdrawn (on a copy of the home, served by the same app
in a thread of the test, so the deletion reaches no other test)."""
from __future__ import annotations

import io
import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from tests.flows.conftest import MABILLON, free_port, stop_group
from tests.reading.conftest import (SCAN_DOC, SCAN_QUESTION, TEXT_QUESTION, TOKENS, bearer,
                                    copy_home, settings_of)
from tests.reading.test_reader_pages import INTERNAL  # what a reader must never read

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def served_room(sample_home, tmp_path_factory):
    """A copy of the sample home (this module deletes from it) behind a real reading room."""
    home = copy_home(sample_home, tmp_path_factory.mktemp("browser") / "home")
    port = free_port()
    log_path = home.parent / "reading-room.log"
    env = {**os.environ, "MABILLON_CHUNKING__TARGET_TOKENS": "40"}
    with log_path.open("wb") as log:
        process = subprocess.Popen([str(MABILLON), "reading-room", "--home", str(home), "--port", str(port)],
                                   env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, log_path.read_text(errors="replace")[-3000:]
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "reading room did not start"
            time.sleep(0.5)
        yield url, home
    finally:
        stop_group(process, 30)


@pytest.fixture(scope="module")
def alice_query(served_room) -> str:
    """Alice's question, asked through the running room's question box (a form post)."""
    url, _ = served_room
    r = httpx.post(f"{url}/ask", data={"question": SCAN_QUESTION}, headers=bearer("alice"), timeout=300)
    assert r.status_code == 303, r.text
    return f"{url}{r.headers['location']}"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "run deploy/install-system-packages.sh (Debian chromium)"
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        yield b
        b.close()


def cited_word_boxes(home: Path, query_id: str) -> tuple[list[tuple[float, ...]], int]:
    """The word boxes (page pixels) of the top citation, from the lineage — not from the page."""
    from tasks.reading.catalog import Catalog
    from tasks.store.layout import StoreLayout
    from tasks.store.query_records import read_query_record
    from tasks.store.routing import read_routing

    layout = StoreLayout.from_settings(settings_of(home))
    record = read_query_record(layout, query_id)
    top = record.documents[0]
    assert top.doc_id == SCAN_DOC, f"best citation is {top.doc_id}, not the scanned register"
    catalog = Catalog.load(layout, read_routing(layout).serving)
    revision_id = catalog.current[SCAN_DOC]
    chunk = catalog.chunk(revision_id, top.evidence[0].chunk_id)
    page = catalog.page(revision_id, 1)
    words = [e for e in catalog.elements(revision_id)[1] if e.kind == "word"]
    start, end = chunk.char_start - page.offset, chunk.char_end - page.offset
    cited = [w.bbox for w in words if w.char_start < end and w.char_end > start]
    assert 0 < len(cited) < len(words)
    return cited, len(words)


def highlight_mask(rgb: np.ndarray) -> np.ndarray:
    """Pixels tinted by the highlight: the page is greyscale (R = G = B), the mark is yellow."""
    r, b = rgb[..., 0].astype(int), rgb[..., 2].astype(int)
    return (r - b > 60) & (r > 120)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_evidence_page_highlights_the_cited_words_and_nothing_else(served_room, browser, tmp_path):
    url, home = served_room
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, device_scale_factor=1,
                                  extra_http_headers=bearer("alice"))
    page = context.new_page()
    page.goto(f"{url}/")
    page.get_by_label("question").fill(SCAN_QUESTION)
    with page.expect_navigation(url=f"{url}/queries/*", timeout=300_000):
        page.get_by_role("button", name="Chercher").click(no_wait_after=True)
    page.wait_for_load_state("networkidle")
    query_id = page.url.rsplit("/", 1)[1]
    figure = page.locator("#doc-1 figure.page-image").first
    figure.scroll_into_view_if_needed()
    image = figure.locator("img")
    assert image.evaluate("img => img.complete && img.naturalWidth > 0")
    box = image.bounding_box()
    shot = Image.open(io.BytesIO(page.screenshot(full_page=False))).convert("RGB")
    shot.save(tmp_path / "evidence.png")
    x, y, w, h = (int(v) for v in figure.get_attribute("data-region").split(","))
    scale = box["width"] / w
    assert abs(box["height"] / h - scale) < 0.01  # displayed at the crop's own aspect

    cited, n_words = cited_word_boxes(home, query_id)
    crop = np.asarray(shot)[int(box["y"]):int(box["y"] + box["height"]),
                            int(box["x"]):int(box["x"] + box["width"])]
    mask = highlight_mask(crop)
    expected_in = np.zeros(mask.shape, bool)  # each cited word, shrunk: must be highlighted
    allowed = np.zeros(mask.shape, bool)  # each cited word, grown by antialiasing: may be
    for x0, y0, x1, y1 in cited:
        sx0, sy0, sx1, sy1 = ((x0 - x) * scale, (y0 - y) * scale, (x1 - x) * scale, (y1 - y) * scale)
        allowed[max(0, int(sy0) - 2):int(sy1) + 3, max(0, int(sx0) - 2):int(sx1) + 3] = True
        inner = mask[int(sy0) + 2:int(sy1) - 1, int(sx0) + 2:int(sx1) - 1]
        expected_in[int(sy0) + 2:int(sy1) - 1, int(sx0) + 2:int(sx1) - 1] = True
        if inner.size:  # glyph ink stays dark under the multiply blend; the rest is tinted
            assert inner.mean() > 0.35, f"word at {(x0, y0, x1, y1)} is not highlighted"
    assert mask.sum() > 0.5 * expected_in.sum()
    stray = mask & ~allowed
    assert stray.sum() < 0.003 * mask.sum(), f"{stray.sum()} highlighted pixels off the cited words"
    # the crop holds text that is not cited (the page has other chunks), and it stays grey
    grey = crop[..., 0].astype(int) < 110
    assert (grey & ~allowed).sum() > 500, "nothing uncited in the crop: the check would be empty"
    context.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_another_tenant_gets_404_in_the_browser(served_room, browser, alice_query):
    alice = browser.new_context(extra_http_headers=bearer("alice"))
    page = alice.new_page()
    assert page.goto(alice_query).status == 200
    page.wait_for_load_state("networkidle")
    crop_url = page.locator("#doc-1 figure.page-image img").first.get_attribute("src")
    manifest_url = page.locator("#doc-1 a", has_text="manifeste IIIF").first.get_attribute("href")
    info_url = crop_url.rsplit("/", 4)[0] + "/info.json"
    for address in (crop_url, manifest_url, info_url):
        assert alice.request.get(address).status == 200, address
    alice.close()
    bob = browser.new_context(extra_http_headers=bearer("bob"))
    page = bob.new_page()
    assert page.goto(alice_query).status == 404
    assert "Page introuvable" in page.content() and "jeton" in page.content()
    for address in (crop_url, manifest_url, info_url):
        assert bob.request.get(address).status == 404, address
    bob.close()


VIEWPORT = {"width": 1366, "height": 768}


def all_accepted_record(home: Path, query_id: str) -> str:
    """A record of our own making: alice's answer with every document accepted, so its evidence
    runs over two pages (5 accepted documents a page)."""
    from tasks.store.layout import StoreLayout
    from tasks.store.query_records import read_query_record

    layout = StoreLayout.from_settings(settings_of(home))
    record = read_query_record(layout, query_id)
    made = f"{query_id}-every-doc"
    docs = [d.model_copy(update={"status": "accepted"}) for d in record.documents]
    assert len(docs) > 5
    (layout.queries / f"{made}.json").write_text(
        record.model_copy(update={"query_id": made, "documents": docs}).model_dump_json(), "utf-8")
    return made


def shows_only_reader_words(page) -> str:
    """The page's text with every fold opened, checked for internal labels; returned."""
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    text = page.inner_text("body")
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = false)")
    found = INTERNAL.search(text)
    assert found is None, f"{page.url}: {found.group(0)!r} in {text[max(0, found.start() - 80):found.end() + 80]!r}"
    return text


def first_accepted_highlight_in_view(page) -> str:
    """The first accepted document's highlighted passage lies inside the 1366×768 viewport, the
    page not scrolled: every highlighted word of its crop, or the first line of its marked text."""
    assert page.evaluate("window.scrollY") == 0
    section = page.locator('section.doc[data-status="accepted"]').first
    citation = section.locator(".citation").first
    if citation.get_attribute("data-kind") == "image":
        image = citation.locator("figure.page-image img")
        assert image.evaluate("img => img.complete && img.naturalWidth > 0")
        boxes = [r.bounding_box() for r in citation.locator("figure.page-image rect.cited").all()]
    else:
        boxes = [citation.locator("mark.cited").evaluate(
            "m => { const r = m.getClientRects()[0]; return {x: r.x, y: r.y, width: r.width, height: r.height}; }")]
    assert boxes, f"{page.url}: nothing highlighted in the first accepted document"
    for box in boxes:
        assert box["width"] > 0 and box["height"] > 0
        assert 0 <= box["y"] and box["y"] + box["height"] <= VIEWPORT["height"], (page.url, box)
        assert 0 <= box["x"] and box["x"] + box["width"] <= VIEWPORT["width"], (page.url, box)
    return citation.get_attribute("data-kind")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_evidence_page_shows_its_first_accepted_passage_at_a_glance(served_room, browser,
                                                                          alice_query, tmp_path):
    url, home = served_room
    text_answer = httpx.post(f"{url}/ask", data={"question": TEXT_QUESTION}, headers=bearer("alice"),
                             timeout=300)
    assert text_answer.status_code == 303, text_answer.text
    paged = all_accepted_record(home, alice_query.rsplit("/", 1)[1])
    pages = {"scan": alice_query, "text": f"{url}{text_answer.headers['location']}",
             "paged-1": f"{url}/queries/{paged}", "paged-2": f"{url}/queries/{paged}?page=2",
             "dated": f"{url}/queries/{paged}?date_from=1850&date_to=1960",
             "corpus": f"{url}/queries/{paged}?corpus=correspondance"}
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1,
                                  extra_http_headers=bearer("alice"))
    page = context.new_page()
    kinds = {}
    for name, address in pages.items():
        assert page.goto(address).status == 200, address
        page.wait_for_load_state("networkidle")
        shot = tmp_path / f"evidence-{name}.png"
        page.screenshot(path=str(shot))
        print(f"screenshot {shot}")
        kinds[name] = first_accepted_highlight_in_view(page)
        text = shows_only_reader_words(page)
        if name == "scan":  # accepted first; the others folded, one line each
            assert page.locator('section.doc[data-status="accepted"]').count() == 1
            assert page.locator("details.others li").count() >= 5
            assert not page.locator("details.others").evaluate("d => d.open")
            assert page.evaluate("document.documentElement.scrollHeight") <= 2 * VIEWPORT["height"]
        if name.startswith("paged"):
            assert page.locator('section.doc[data-status="accepted"]').count() == 5 or name == "paged-2"
            assert re.search(f"page {name[-1]} sur [2-9]", text), text[:300]
        if name == "dated":  # every accepted document shown is dated 1850 to 1960
            dates = page.locator('section.doc[data-status="accepted"] p.meta').all_inner_texts()
            assert dates and all(any(str(y) in d for y in range(1850, 1961)) for d in dates), dates
        if name == "corpus":
            metas = page.locator('section.doc[data-status="accepted"] p.meta').all_inner_texts()
            assert metas and all(m.startswith("Correspondance") for m in metas), metas
    assert kinds["scan"] == "image" and kinds["text"] == "text"
    # the documents, and one of them: titles, no None, no server path
    for name, address in {"documents": f"{url}/documents", "search": f"{url}/documents?q=vaux+registre",
                          "document": f"{url}/documents/{SCAN_DOC}"}.items():
        assert page.goto(address).status == 200
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(tmp_path / f"{name}.png"))
        print(f"screenshot {tmp_path / f'{name}.png'}")
        shows_only_reader_words(page)
        if name != "document":
            titles = page.locator("table.documents td:first-child a").all_inner_texts()
            assert titles and all(t.strip() for t in titles)
    context.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_token_holder_following_an_evidence_link_is_offered_to_sign_in(served_room, browser,
                                                                        alice_query, tmp_path):
    url, _ = served_room
    context = browser.new_context(viewport=VIEWPORT)  # no token: a link opened from a mail, say
    page = context.new_page()
    assert page.goto(alice_query).status == 404
    page.screenshot(path=str(tmp_path / "not-found.png"))
    print(f"screenshot {tmp_path / 'not-found.png'}")
    hint = shows_only_reader_words(page)
    assert "jeton d'accès" in hint and "Page introuvable" in hint
    # the same page for what does not exist: nothing tells the two apart
    missing = context.request.get(f"{url}/queries/20990101T000000-deadbeef-000000")
    assert missing.status == 404 and missing.body() == context.request.get(alice_query).body()
    page.get_by_label("Jeton d'accès").fill(TOKENS["alice"])
    with page.expect_navigation():
        page.get_by_role("button", name="S'identifier").click()
    page.wait_for_load_state("networkidle")
    assert page.url == alice_query  # back to the evidence, signed in
    assert page.locator('section.doc[data-status="accepted"]').count() >= 1
    page.screenshot(path=str(tmp_path / "signed-in.png"))
    context.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_document_deleted_after_the_query_is_shown_withdrawn(served_room, browser, alice_query,
                                                                tmp_path):
    from tests.reading.served import served_room as room_in_thread

    # a copy of the module's home (alice's answer in it), behind a room of its own: the deletion
    # must not reach the other tests' evidence
    home = copy_home(served_room[1], tmp_path / "home")
    with room_in_thread(settings_of(home)) as url:
        evidence_url = f"{url}/queries/{alice_query.rsplit('/', 1)[1]}"
        see_the_deleted_document_withdrawn(browser, home, evidence_url, tmp_path)


def see_the_deleted_document_withdrawn(browser, home: Path, evidence_url: str, tmp_path: Path) -> None:
    from flows.operate import DeleteParams, delete

    context = browser.new_context(viewport={"width": 1280, "height": 900}, extra_http_headers=bearer("alice"))
    page = context.new_page()
    assert page.goto(evidence_url).status == 200
    page.wait_for_load_state("networkidle")
    crop_url = page.locator("#doc-1 figure.page-image img").first.get_attribute("src")
    assert page.locator("#doc-1").get_attribute("data-state") == "shown"

    delete(DeleteParams(doc_ids=[SCAN_DOC], reason="rights withdrawn"), settings=settings_of(home))

    assert page.goto(evidence_url).status == 200
    page.wait_for_load_state("networkidle")
    section = page.locator("#doc-1")
    assert section.get_attribute("data-state") == "withdrawn"
    assert "Document retiré" in section.inner_text()
    assert section.locator("img").count() == 0
    html = page.content()
    assert SCAN_DOC not in html and "Morin" not in html and "Lhuillier" not in html
    page.screenshot(path=str(tmp_path / "withdrawn.png"), full_page=True)
    assert context.request.get(crop_url).status == 404
    context.close()
