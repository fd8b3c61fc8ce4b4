"""The reading room as an adversary meets it, over HTTP: `mabillon reading-room` itself on a
loopback port, over a home holding a digital PDF with one 200 × 200-inch page.

Fuzzed (hypothesis): IIIF parameters, identifiers, `as_of` dates, bodies of `POST /api/ask`,
methods — never a 5xx, every refusal in words. The giant page is served at the size asked,
within a bounded growth of the server's resident memory. Cross-site requests are refused, the
sign-in cookie is not the token, anonymous questions are listed to nobody, errors are logged
after the first question, and SIGTERM leaves no Prefect server behind.
"""
from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import psutil
import pymupdf
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
from PIL import Image, ImageDraw

from flows.make_sample import digital_pdf, _font_file
from schemas.settings import InspectionLimits, MabillonSettings
from tasks.access.principals import token_digest
from tests.flows.conftest import MABILLON, free_port, stop_group

GIANT_INCHES = 200
ALICE = "alice-fuzz-token-0123456789"
FUZZ = hsettings(max_examples=60, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
MAX_PIXELS = 2_000_000  # the room's limit per answer here: quick renders, the same code path
MB = 1024 * 1024


def giant_pdf() -> bytes:
    """One 200 × 200-inch page (the PDF format's own ceiling) with a real text layer."""
    side = GIANT_INCHES * 72.0
    doc = pymupdf.open()
    page = doc.new_page(width=side, height=side)
    page.insert_font(fontname="dejavu", fontfile=str(_font_file()))
    for n, y in enumerate(range(400, int(side), 1600)):
        page.insert_text((300, y), f"Plan cadastral de la commune, feuille {n}: parcelles, "
                                   "chemins vicinaux et limites des sections.", fontname="dejavu",
                         fontsize=120)
        page.draw_rect(pymupdf.Rect(300, y + 200, side - 300, y + 900), color=(0, 0, 0), width=20)
    doc.subset_fonts()
    return doc.tobytes(garbage=3, deflate=True)


def small_scan() -> bytes:
    image = Image.new("L", (420, 120), 255)
    ImageDraw.Draw(image).text((10, 40), "Registre des greniers, 1793", fill=0)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def settings_of(home: Path) -> MabillonSettings:
    return MabillonSettings(home=home, limits=InspectionLimits(max_page_inches=GIANT_INCHES + 1))


@pytest.fixture(scope="module")
def fuzz_home(tmp_path_factory) -> Path:
    from flows.release import release

    root = tmp_path_factory.mktemp("room-fuzz")
    files = root / "files"
    files.mkdir()
    (files / "plan-cadastral.pdf").write_bytes(giant_pdf())
    (files / "lettre-prefet.pdf").write_bytes(digital_pdf(
        ["Le préfet de l'Orne au maire de Mortagne : les greniers seront visités le 3 brumaire."]))
    (files / "registre.png").write_bytes(small_scan())
    # a document only the logging test reads: its bytes are damaged there
    (files / "abime.pdf").write_bytes(digital_pdf(["Pièce abîmée : inventaire des cloches de 1791."]))
    home = root / "home"
    home.mkdir()
    (home / "principals.json").write_text(json.dumps(
        {"alice": {"tenant": "default", "groups": ["public"], "token_sha256": token_digest(ALICE)}}))
    release(paths=[str(files)], settings=settings_of(home))
    return home


def catalog(home: Path):
    from tasks.reading.catalog import Catalog
    from tasks.store.layout import StoreLayout
    from tasks.store.routing import read_routing

    layout = StoreLayout.from_settings(settings_of(home))
    return Catalog.load(layout, read_routing(layout).serving)


def revision_of(home: Path, name: str) -> str:
    cat = catalog(home)
    return next(r.revision_id for r in cat.revisions.values() if r.uri.endswith(name))


def room_env() -> dict[str, str]:
    """No PREFECT_API_URL: the room starts its own temporary Prefect server, as it does for a
    researcher who runs `mabillon reading-room` alone."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PREFECT_API_URL", "PREFECT_API_AUTH_STRING")}
    env.update({"MABILLON_READING_ROOM__MAX_PIXELS": str(MAX_PIXELS),
                "MABILLON_READING_ROOM__CACHE_MB": "64"})
    return env


class Room:
    def __init__(self, home: Path, log_path: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [str(MABILLON), "reading-room", "--home", str(home), "--port", str(self.port)],
                env=room_env(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            assert self.process.poll() is None, self.log()[-3000:]
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "reading room did not start"
            time.sleep(0.3)
        self.http = httpx.Client(base_url=self.url, timeout=120)

    def log(self) -> str:
        return self.log_path.read_text("utf-8", errors="replace")

    def stop(self) -> None:
        self.http.close()
        stop_group(self.process, 30)


@pytest.fixture(scope="module")
def room(fuzz_home):
    served = Room(fuzz_home, fuzz_home.parent / "reading-room.log")
    try:
        yield served
    finally:
        served.stop()


def in_words(response: httpx.Response) -> None:
    """A refusal says what is wrong: a JSON error or a page, never an empty body."""
    assert response.status_code < 500, (response.request.method, str(response.request.url),
                                        response.status_code, response.text[:500])
    if response.status_code >= 400 and response.request.method != "HEAD":
        assert len(response.text.strip()) > 5, (str(response.request.url), response.status_code)


# ---- strategies ------------------------------------------------------------------------------

NUMBER = st.one_of(st.integers(0, 10**10).map(str), st.integers(-5, 5).map(str),
                   st.floats(0, 1e6, allow_nan=False).map(lambda f: f"{f:.3f}"),
                   st.sampled_from(["٣", "³", "１", "1e3", "0x10", ".5", "5.", "", "-0"]))
REGION = st.one_of(
    st.sampled_from(["full", "square", "0,0,1,1", "pct:0,0,100,100", "pct:99.9,99.9,1,1"]),
    st.builds(lambda *n: ",".join(n), NUMBER, NUMBER, NUMBER, NUMBER),
    st.builds(lambda *n: "pct:" + ",".join(n), NUMBER, NUMBER, NUMBER, NUMBER),
    st.text(max_size=24))
SIZE = st.one_of(
    st.sampled_from(["max", "^max", "^1,99999", "99999,1", "^99999,", "^,99999", "!1,1",
                     "^!65536,65536", "pct:0.0001", "^pct:100000", "full"]),
    st.builds(lambda up, a, b, bang: f"{up}{bang}{a},{b}", st.sampled_from(["", "^"]), NUMBER,
              NUMBER, st.sampled_from(["", "!"])),
    st.builds(lambda up, a: f"{up}{a},", st.sampled_from(["", "^"]), NUMBER),
    st.builds(lambda up, a: f"{up},{a}", st.sampled_from(["", "^"]), NUMBER),
    st.builds(lambda up, a: f"{up}pct:{a}", st.sampled_from(["", "^"]), NUMBER),
    st.text(max_size=16))
ROTATION = st.one_of(st.sampled_from(["0", "90", "!0", "360", "-90", "0.0", "1e2", "٠"]),
                     NUMBER, st.text(max_size=8))
QUALITY = st.one_of(
    st.builds(lambda q, f: f"{q}.{f}", st.sampled_from(["default", "color", "gray", "bitonal", "x"]),
              st.sampled_from(["jpg", "png", "tif", "webp", "pdf", "JPG", ""])),
    st.text(max_size=16))
HOSTILE_ID = st.one_of(
    st.sampled_from(["..", "../../principals", "..%2F..%2Fprincipals.json", "%00", "\x00", "r٣-p٣",
                     "x-p³", "x-p٠٠٠١", "x-p00000001", "-p1", "r-p", "ﬁ", "a" * 300,
                     "20990101T000000-deadbeef-0000000000000000\n", "CON", "%2e%2e"]),
    st.text(max_size=40))
DATE = st.one_of(
    st.builds(lambda d, sign, h, m: f"{d.isoformat(timespec='seconds')}{sign}{h:02d}:{m:02d}",
              st.datetimes(), st.sampled_from(["+", "-"]), st.integers(0, 24), st.integers(0, 60)),
    st.dates().map(lambda d: d.isoformat()),
    st.sampled_from(["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "٢٠٢٠-٠١-٠١",
                     "2020-02-30", "2020-01-01T24:00", "9999-12-31", "0001-01-01", "now", ""]),
    st.text(max_size=30))


def segment(value: str) -> str:
    return quote(value, safe="") or "%20"


# ---- the fuzz --------------------------------------------------------------------------------

def test_iiif_parameters_never_answer_5xx(room, fuzz_home):
    ids = [f"{revision_of(fuzz_home, name)}-p0001"
           for name in ("plan-cadastral.pdf", "lettre-prefet.pdf", "registre.png")]

    @FUZZ
    @given(st.sampled_from(ids), REGION, SIZE, ROTATION, QUALITY)
    def check(image_id, region, size, rotation, quality):
        r = room.http.get(f"/iiif/3/{image_id}/{segment(region)}/{segment(size)}/"
                          f"{segment(rotation)}/{segment(quality)}")
        in_words(r)
        if r.status_code == 200:
            assert r.headers["content-type"] in ("image/jpeg", "image/png")
            width, height = Image.open(io.BytesIO(r.content)).size
            assert width * height <= MAX_PIXELS

    check()
    # the cases of the issue, each by name
    giant = ids[0]
    for path, status in ((f"{giant}/full/^1,99999/0/default.jpg", 400),
                         (f"{giant}/full/max/0/default.jpg", 200),
                         (f"{giant}/full/^max/0/default.png", 200)):
        r = room.http.get(f"/iiif/3/{path}")
        assert r.status_code == status, (path, r.text[:300])
    assert "65,500" in room.http.get(f"/iiif/3/{giant}/full/^1,99999/0/default.jpg").json()["error"]


def test_identifiers_and_dates_never_answer_5xx(room, fuzz_home):
    revision = revision_of(fuzz_home, "lettre-prefet.pdf")

    @FUZZ
    @given(HOSTILE_ID, DATE, st.sampled_from([
        "/iiif/3/{id}/info.json", "/iiif/3/{id}", "/iiif/3/{id}/full/max/0/default.jpg",
        "/iiif/manifest/{id}", "/documents/{id}", "/queries/{id}", "/api/queries/{id}",
        "/iiif/query/{id}/manifest", "/at/{date}/iiif/3/{rev}-p{id}/info.json",
        "/at/{date}/iiif/manifest/{rev}", "/documents?as_of={date}", "/iiif/3/{rev}-p{id}/info.json",
        "/documents?date_from={date}&q={id}", "/documents?page={id}&corpus={id}",
        "/queries/{id}?date_to={date}&page={id}"]))
    def check(ident, date, template):
        url = template.format(id=segment(ident), date=segment(date), rev=revision)
        in_words(room.http.get(url))

    check()
    for value in ("9999-12-31T23:59:59-23:59", "٢٠٢٠-٠١-٠١"):
        r = room.http.get(f"/documents?as_of={quote(value)}")
        assert r.status_code == 400 and "as_of" in r.text, r.text[:300]
    assert room.http.get(f"/iiif/3/{revision}-p٣/info.json").status_code == 404
    assert room.http.get(f"/iiif/3/{revision}-p³/info.json").status_code == 404


BODY = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                 max_leaves=10).map(lambda v: json.dumps(v).encode()),
    # the question's own field, always wrong somehow: too short, too long, not a string, extra keys
    st.builds(lambda q: json.dumps({"question": q}).encode(),
              st.one_of(st.text(max_size=2).filter(lambda t: len(t.strip()) < 3), st.integers(),
                        st.lists(st.text(max_size=3), max_size=2), st.just("x" * 2001))),
    st.builds(lambda extra: json.dumps({"question": "les greniers ?", extra: 1}).encode(),
              st.text(min_size=1, max_size=8).filter(lambda k: k not in ("question", "as_of"))),
    st.builds(lambda d: json.dumps({"question": "les greniers ?", "as_of": "x" + d}).encode(),
              st.text(max_size=20)),
    st.sampled_from([b"[" * 100_000, b'{"question":' + b"[" * 100_000, b"\xff\xfe\x00",
                     b'{"question": "\\ud800 abc"}', b'{"question": "' + b"\xc3\x28" * 10 + b'"}']))
CONTENT_TYPE = st.sampled_from(["application/json", "application/json; charset=utf-8",
                                "APPLICATION/JSON", "text/plain", "application/x-www-form-urlencoded",
                                "multipart/form-data; boundary=x", None, "application/json\x7f"])


def test_bodies_and_methods_never_answer_5xx(room):
    @FUZZ
    @given(BODY, CONTENT_TYPE)
    def check_ask(body, content_type):
        headers = {"Content-Type": content_type} if content_type else {}
        in_words(room.http.post("/api/ask", content=body, headers=headers))

    @FUZZ
    @given(st.dictionaries(st.sampled_from(["question", "as_of", "token", "x"]),
                           st.text(max_size=50), max_size=4), st.sampled_from(["/ask", "/login", "/logout"]))
    def check_forms(fields, path):
        if path == "/ask":  # never a valid question: the fuzz is not a load test of the agent
            fields["as_of"] = "x" + fields.get("as_of", "")
        in_words(room.http.post(path, data=fields, follow_redirects=False))

    @FUZZ
    @given(st.sampled_from(["PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE", "POST", "GET"]),
           st.sampled_from(["/", "/api/ask", "/api/queries", "/login", "/documents", "/healthz",
                            "/iiif/3/x-p0001/info.json", "/ask", "/nowhere"]))
    def check_methods(method, path):
        in_words(room.http.request(method, path, follow_redirects=False))

    # what h11 lets a client send: printable ASCII, no whitespace at either end
    header = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7e),
                     min_size=1, max_size=40).map(str.strip).filter(bool)

    @FUZZ
    @given(header, header, st.one_of(header, header.map(lambda t: f"Bearer {t}")),
           st.sampled_from(["/login", "/logout", "/api/ask", "/", "/api/queries", "/iiif/3/x-p1/info.json"]))
    def check_headers(origin, session, authorization, path):
        headers = {"Origin": origin, "Cookie": f"mabillon_session={session}", "Authorization": authorization}
        method = "GET" if path in ("/", "/api/queries") or path.startswith("/iiif") else "POST"
        in_words(room.http.request(method, path, headers=headers, data={"token": "x"}
                                   if path == "/login" else None, follow_redirects=False))

    check_ask()
    check_forms()
    check_methods()
    check_headers()
    huge = room.http.post("/api/ask", content=b'{"question": "' + b"a" * 300_000 + b'"}',
                          headers={"Content-Type": "application/json"})
    assert huge.status_code == 413, huge.text[:200]
    deep = room.http.post("/api/ask", content=b"[" * 60_000, headers={"Content-Type": "application/json"})
    assert deep.status_code == 400 and "recursion" in deep.json()["error"]
    plain = room.http.post("/api/ask", content=json.dumps({"question": "les greniers ?"}),
                           headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415 and "application/json" in plain.json()["error"]


# ---- memory on a giant page --------------------------------------------------------------------

def status_kb(pid: int, field: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.M).group(1))


def test_a_giant_page_is_served_at_the_size_asked_in_bounded_memory(room, fuzz_home):
    revision = revision_of(fuzz_home, "plan-cadastral.pdf")
    ident = f"{revision}-p0001"
    info = room.http.get(f"/iiif/3/{ident}/info.json").json()
    assert info["width"] == info["height"] == GIANT_INCHES * 150  # 30,000 pixels a side at 150 dpi
    pid = room.process.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    before = status_kb(pid, "VmRSS")
    for path in ("full/max/0/default.jpg", "full/1000,/0/default.jpg", "full/!512,512/0/default.png",
                 "pct:40,40,10,10/max/0/default.jpg", "0,0,30000,30000/200,/0/default.jpg",
                 "29000,29000,1000,1000/max/0/default.png", "15000,15000,2,2/^max/0/default.jpg",
                 "square/,800/0/default.jpg"):
        r = room.http.get(f"/iiif/3/{ident}/{path}")
        assert r.status_code == 200, (path, r.text[:300])
        size = Image.open(io.BytesIO(r.content)).size
        assert size[0] * size[1] <= MAX_PIXELS
    assert Image.open(io.BytesIO(room.http.get(f"/iiif/3/{ident}/full/1000,/0/default.jpg").content)).size == (1000, 1000)
    assert room.http.get(f"/documents/{catalog(fuzz_home).revisions[revision].doc_id}").status_code == 200
    assert room.http.get(f"/iiif/manifest/{revision}").status_code == 200
    peak, after = status_kb(pid, "VmHWM"), status_kb(pid, "VmRSS")
    print(f"giant page: RSS {before // 1024} MB before, peak {peak // 1024} MB, {after // 1024} MB after")
    # the whole page at 150 dpi would be 30,000² × 3 bytes = 2.5 GiB; each answer here ≤ 6 MB
    assert (peak - before) * 1024 < 500 * MB, f"peak RSS grew {(peak - before) // 1024} MB"
    assert (after - before) * 1024 < 300 * MB, f"RSS grew {(after - before) // 1024} MB and stayed"


# ---- cross-site, sessions, anonymous questions -----------------------------------------------------

def test_no_other_site_may_post_or_read_answers(room, fuzz_home):
    evil = {"Origin": "https://evil.example"}
    ask = room.http.post("/api/ask", json={"question": "les greniers ?"}, headers=evil)
    assert ask.status_code == 403 and "another site" in ask.json()["error"]
    assert "access-control-allow-origin" not in ask.headers
    login = room.http.post("/login", data={"token": ALICE}, headers=evil, follow_redirects=False)
    assert login.status_code == 403 and "set-cookie" not in login.headers
    sneaky = room.http.post("/login", data={"token": ALICE}, follow_redirects=False,
                            headers={"Sec-Fetch-Site": "cross-site"})
    assert sneaky.status_code == 403
    # a preflight for the question box is not granted; the query endpoints answer no CORS header
    preflight = room.http.options("/api/ask", headers={**evil, "Access-Control-Request-Method": "POST",
                                                       "Access-Control-Request-Headers": "content-type"})
    assert "access-control-allow-origin" not in preflight.headers
    for path in ("/api/queries", "/", "/documents"):
        assert "access-control-allow-origin" not in room.http.get(path, headers=evil).headers
    # IIIF stays open to viewers on other origins, as IIIF clients expect
    ident = f"{revision_of(fuzz_home, 'lettre-prefet.pdf')}-p0001"
    info = room.http.get(f"/iiif/3/{ident}/info.json", headers=evil)
    assert info.status_code == 200 and info.headers["access-control-allow-origin"] == "*"
    iiif_preflight = room.http.options(f"/iiif/3/{ident}/info.json", headers={
        **evil, "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"})
    assert iiif_preflight.status_code == 200
    # the room's own pages post as before
    own = httpx.post(f"{room.url}/login", data={"token": ALICE}, headers={"Origin": room.url},
                     follow_redirects=False, timeout=60)  # not room.http: its jar would keep the session
    assert own.status_code == 303


def test_the_session_cookie_is_not_the_token_and_ends_at_sign_out(room):
    with httpx.Client(base_url=room.url, timeout=60) as browser:
        r = browser.post("/login", data={"token": ALICE}, follow_redirects=False)
        assert r.status_code == 303
        cookie = r.headers["set-cookie"]
        assert ALICE not in cookie and token_digest(ALICE) not in cookie
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        assert "lecteur : alice" in browser.get("/").text
        session = browser.cookies["mabillon_session"]
        assert browser.post("/logout", follow_redirects=False).status_code == 303
    # the id is dead on the server, not only forgotten by this browser
    stale = httpx.get(f"{room.url}/", cookies={"mabillon_session": session}, timeout=60)
    assert stale.status_code == 401 and "sign in again" in stale.text
    # a token as a cookie (what earlier versions stored) names no one
    assert "lecteur : alice" not in httpx.get(f"{room.url}/", cookies={"mabillon_token": ALICE}).text


# ---- logging after the first question; the question box's refusals --------------------------------

def test_errors_are_logged_after_the_first_question(room, fuzz_home):
    from tasks.store.layout import StoreLayout

    alice = {"Authorization": f"Bearer {ALICE}"}
    too_long = room.http.post("/api/ask", json={"question": "Quelles parcelles ? " * 100}, headers=alice)
    assert too_long.status_code == 400 and "shorten" in too_long.json()["error"], too_long.text[:300]
    future = room.http.post("/api/ask", json={"question": "les greniers ?",
                                              "as_of": "9999-12-31T23:59:59-23:59"}, headers=alice)
    assert future.status_code == 400 and "1 to 9999" in future.json()["error"]
    answered = room.http.post("/api/ask", json={"question": "Quand les greniers seront-ils visités ?"},
                              headers=alice)
    assert answered.status_code == 200, answered.text[:500]
    query_id = answered.json()["query_id"]
    assert query_id in {q["query_id"] for q in room.http.get("/api/queries", headers=alice).json()}
    # damaged bytes in the store: a genuine failure, answered 500 and logged with its traceback
    layout = StoreLayout.from_settings(settings_of(fuzz_home))
    revision = revision_of(fuzz_home, "abime.pdf")
    blob = Path(str(layout.blob_path(catalog(fuzz_home).revisions[revision].digest)))
    intact = blob.read_bytes()
    blob.write_bytes(intact[:-10] + b"0123456789")
    try:
        failed = room.http.get(f"/iiif/3/{revision}-p0001/full/200,/0/default.jpg")
    finally:  # the other tests of this module read the same home
        blob.write_bytes(intact)
    assert failed.status_code == 500 and "log" in failed.json()["error"]
    deadline = time.monotonic() + 10
    while "is corrupt in the store" not in room.log() and time.monotonic() < deadline:
        time.sleep(0.2)
    log = room.log()
    assert f"GET /iiif/3/{revision}-p0001/full/200,/0/default.jpg failed" in log
    assert "Traceback" in log and "is corrupt in the store" in log


def test_anonymous_questions_are_listed_to_nobody(room, fuzz_home):
    answered = room.http.post("/api/ask", json={"question": "Qui visite les greniers de Mortagne ?"})
    assert answered.status_code == 200, answered.text[:500]
    query_id = answered.json()["query_id"]
    assert re.fullmatch(r"\d{8}T\d{6}-[0-9a-f]{8}-[0-9a-f]{16}", query_id)  # 64 random bits
    assert room.http.get("/api/queries").json() == []
    assert query_id not in room.http.get("/").text
    assert "listées à personne" in room.http.get("/").text
    alice = {"Authorization": f"Bearer {ALICE}"}
    assert query_id not in {q["query_id"] for q in room.http.get("/api/queries", headers=alice).json()}
    # reachable by its link, by whoever holds it
    assert room.http.get(f"/queries/{query_id}").status_code == 200
    assert room.http.get(f"/api/queries/{query_id}").json()["query_id"] == query_id


# ---- SIGTERM -------------------------------------------------------------------------------------

# slow: a second reading room process with its own Prefect server, stopped by a signal (~60 CPU-s)
@pytest.mark.slow
def test_sigterm_stops_the_room_and_the_prefect_server_it_started(fuzz_home, tmp_path):
    second = Room(fuzz_home, tmp_path / "second-room.log")
    try:
        parent = psutil.Process(second.process.pid)
        deadline = time.monotonic() + 120
        servers = []
        while not servers:  # its temporary Prefect server, started at once and answering
            servers = [c for c in parent.children(recursive=True)
                       if "prefect.server.api.server:create_app" in " ".join(c.cmdline())]
            assert time.monotonic() < deadline, "no Prefect server started"
            time.sleep(0.2)
        port = servers[0].cmdline()[servers[0].cmdline().index("--port") + 1]
        while True:  # up and answering, as when the question box has used it
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert second.process.poll() is None and time.monotonic() < deadline, second.log()[-2000:]
            time.sleep(0.3)
        os.kill(second.process.pid, signal.SIGTERM)  # the room alone, as a service manager does
        assert second.process.wait(60) == 0, second.log()[-2000:]
        gone = time.monotonic() + 20
        while any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in servers):
            assert time.monotonic() < gone, f"Prefect server {[s.pid for s in servers]} outlived the room"
            time.sleep(0.2)
    finally:
        second.stop()
