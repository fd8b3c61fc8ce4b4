"""The reading room in headless Debian chromium, served by `mabillon reading-room` itself:
a question asked in its box lands on its evidence page, where the highlight covers the cited
words of the scanned page and nothing else (checked with pixels); another tenant gets 404;
a document deleted afterwards is shown withdrawn."""
from __future__ import annotations

import io
import os
import subprocess
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from tests.flows.conftest import MABILLON, free_port, stop_group
from tests.reading.conftest import SCAN_DOC, SCAN_QUESTION, bearer, copy_home, settings_of

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


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_document_deleted_after_the_query_is_shown_withdrawn(served_room, browser, alice_query,
                                                                tmp_path):
    from flows.operate import DeleteParams, delete

    url, home = served_room
    context = browser.new_context(viewport={"width": 1280, "height": 900}, extra_http_headers=bearer("alice"))
    page = context.new_page()
    evidence_url = alice_query
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
