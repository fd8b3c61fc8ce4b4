"""Mirador 4, installed from npm at test time, opens a query's manifest served by a real reading
room on loopback, in headless Debian chromium at 1366×768: it lists the citations' annotations
(motivation `commenting`, with their words) and draws the cited box on the page.

Mirador runs on another origin (a second loopback server, serving its page and bundle: Chrome
lets a page reach a loopback server only from the loopback address space) as it would on a
library's site: the room answers it through CORS, and the asker's token travels the
way a viewer sends one (Mirador's request preprocessor). Skipped, with the reason, where npm or
chromium is missing; `MABILLON_TEST_CACHE` moves the npm install (default ~/.cache/mabillon)."""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.reading.conftest import SCAN_QUESTION, TOKENS, settings_of
from tests.flows.conftest import free_port
from tests.reading.served import served_room

# Mirador from npm in a browser: end-to-end, run by `make test`, not `make test-fast`
pytestmark = pytest.mark.slow


CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
MIRADOR_VERSION = "4"
# Mirador 4 strokes annotations in its theme's #00BFFF, or #BF00FF for the hovered one


def mirador_bundle() -> Path:
    """mirador.min.js from `npm install mirador@4` in the test cache (installed once)."""
    cache = Path(os.environ.get("MABILLON_TEST_CACHE", Path.home() / ".cache" / "mabillon")) / "npm-mirador"
    bundle = cache / "node_modules" / "mirador" / "dist" / "mirador.min.js"
    if bundle.is_file():
        return bundle
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: Mirador cannot be fetched (CI installs it)")
    cache.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error",
                               f"mirador@{MIRADOR_VERSION}"], cwd=cache, capture_output=True,
                              text=True, timeout=400)
    except subprocess.TimeoutExpired:
        pytest.skip("npm install mirador timed out: the npm registry is unreachable from here")
    if done.returncode != 0 or not bundle.is_file():
        pytest.skip(f"npm install mirador failed (registry unreachable?): {done.stderr.strip()[-300:]}")
    return bundle


@contextmanager
def viewer_site(bundle: Path, folder: Path):
    """A static site on loopback: `/` is the viewer page written later, `/mirador.min.js` the bundle."""
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    shutil.copyfile(bundle, folder / "mirador.min.js")

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, name="test-viewer-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def viewer_page(manifest: str, canvas: str, token: str) -> str:
    config = {"id": "viewer", "windows": [{"manifestId": manifest, "canvasId": canvas,
                                           "highlightAllAnnotations": True, "sideBarOpen": True,
                                           "sideBarPanel": "annotations"}],
              "window": {"allowClose": False}, "workspaceControlPanel": {"enabled": False}}
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Mirador</title>
<style>html,body{{margin:0;height:100%}}#viewer{{position:absolute;inset:0}}</style></head>
<body><div id="viewer"></div><script src="mirador.min.js"></script><script>
const config = {json.dumps(config)};
config.requests = {{preprocessors: [(url, options) => url.startsWith("{manifest.split('/iiif/')[0]}")
  ? {{...options, headers: {{...(options.headers || {{}}), Authorization: "Bearer {token}"}}}} : options]}};
window.miradorInstance = Mirador.viewer(config);
</script></body></html>"""


@pytest.mark.timeout(300)
def test_mirador_lists_the_citations_and_draws_the_cited_box(sample_home, asked, tmp_path):
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is missing: run deploy/install-system-packages.sh")
    bundle = mirador_bundle()
    qid = asked[("alice", SCAN_QUESTION)]
    site = tmp_path / "site"
    site.mkdir()
    with served_room(settings_of(sample_home)) as url, viewer_site(bundle, site) as viewer, \
            sync_playwright() as pw:
        import httpx

        manifest_url = f"{url}/iiif/query/{qid}/manifest"
        manifest = httpx.get(manifest_url, headers={"Authorization": f"Bearer {TOKENS['alice']}"}).json()
        canvas = manifest["items"][0]
        annotations = canvas["annotations"][0]["items"]
        x, y, w, h = map(int, re.search(r"#xywh=(\d+),(\d+),(\d+),(\d+)$", annotations[0]["target"]).groups())
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768}, device_scale_factor=1)
            (site / "index.html").write_text(viewer_page(manifest_url, canvas["id"], TOKENS["alice"]), "utf-8")
            page.goto(f"{viewer}/index.html")
            # the side panel lists the annotations of the canvas, with their words
            listed = page.get_by_text(f"{len(annotations)} annotation", exact=False)
            listed.first.wait_for(timeout=60_000)
            first_words = annotations[0]["body"]["value"][:30]
            page.get_by_text(first_words, exact=False).first.wait_for(timeout=30_000)
            # the page image drawn, and the box over it in Mirador's stroke colour
            page.locator("canvas").first.wait_for(timeout=30_000)
            page.wait_for_function("""() => {
                const c = document.querySelector('.openseadragon-canvas canvas');
                return c && c.width > 0;}""", timeout=30_000)
            page.wait_for_load_state("networkidle")
            shot_bytes = page.screenshot(full_page=False)
            area = page.locator(".openseadragon-canvas").first.bounding_box()
        finally:
            browser.close()
    shots = Path(os.environ.get("MABILLON_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    shot_path = shots / "mirador-query-manifest-1366x768.png"
    shot_path.write_bytes(shot_bytes)
    print(f"screenshot: {shot_path}")
    rgb = np.asarray(Image.open(io.BytesIO(shot_bytes)).convert("RGB")).astype(int)
    x0, y0 = int(area["x"]), int(area["y"])  # the page view only, not Mirador's own chrome
    rgb = rgb[y0:y0 + int(area["height"]), x0:x0 + int(area["width"])]
    # a 1-pixel stroke is blended with the page: match its hue, not its exact colour
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    stroke = ((b - g > 50) & (r - g > 40)) | ((b - r > 60) & (g - r > 40))  # #BF00FF-ish | #00BFFF-ish
    ys, xs = np.nonzero(stroke)
    assert len(xs) > 40, f"no annotation box drawn (see {shot_path})"
    # the drawn box keeps the cited words' proportions (a wide line of words, not a page)
    drawn_w, drawn_h = xs.max() - xs.min() + 1, ys.max() - ys.min() + 1
    assert drawn_w / max(drawn_h, 1) == pytest.approx(w / h, rel=0.35), (drawn_w, drawn_h, w, h, str(shot_path))
