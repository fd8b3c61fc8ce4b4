"""The answer's references and a document's reference, taken from the reading room over HTTP (a
uvicorn server on loopback) as files a reference manager imports; exported with the viewer's
access now: another tenant's, a deleted or a no-longer-allowed document is never exported."""
from __future__ import annotations

import csv
import io
import json
import threading
import time
from contextlib import contextmanager

import httpx
import pytest

from schemas.settings import MabillonSettings
from tasks.store.layout import StoreLayout
from tests.flows.conftest import free_port
from tests.reading.conftest import (PRINCIPALS, SCAN_DOC, SCAN_QUESTION, TENANT_B_DOC, bearer, copy_home,
                                    settings_of, write_principals)


@contextmanager
def live_room(home):
    """The reading room app served by uvicorn on a free loopback port; stopped on exit."""
    import uvicorn

    from flows.reading_room import create_app

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings_of(home), warm=False), host="127.0.0.1",
                                           port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, name="room-under-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the reading room did not start"
        time.sleep(0.05)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture(scope="module")
def export_home(sample_home, asked, tmp_path_factory):
    """A copy of the sample home holding alice's answer (a test that changes it copies it again)."""
    return copy_home(sample_home, tmp_path_factory.mktemp("export") / "home")


def test_an_answer_exports_as_ris_bibtex_csl_json_and_csv_with_its_pins(export_home, asked):
    import bibtexparser
    import rispy

    qid = asked[("alice", SCAN_QUESTION)]
    with live_room(export_home) as room:
        evidence = room.get(f"/api/queries/{qid}", headers=bearer("alice")).json()
        shown = [d for d in evidence["documents"] if d["state"] != "withdrawn"]
        r = room.get(f"/export/ris/queries/{qid}", headers=bearer("alice"))
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-research-info-systems")
        assert r.headers["content-disposition"] == f'attachment; filename="mabillon-{qid}.ris"'
        entries = rispy.loads(r.text)
        assert [e["call_number"] for e in entries] == [d["doc_id"] for d in shown]  # ranked order
        top, cited = entries[0], shown[0]
        assert top["call_number"] == SCAN_DOC and top["start_page"] == "1"
        revision = cited["revision"]
        link, image = top["urls"]
        assert link.endswith(f"/queries/{qid}#doc-1")
        region = image.rsplit("#", 1)[1]
        assert image.startswith(f"http://127.0.0.1:{room._base_url.port}/iiif/3/{revision}-p0001/full/max/0/default.jpg#xywh=")
        x, y, w, h = (int(v) for v in region[len("xywh="):].split(","))
        crop = cited["citations"][0]["crop"]  # the cited words lie inside the crop the page shows
        assert crop["x"] <= x and crop["y"] <= y and x + w <= crop["x"] + crop["w"] and y + h <= crop["y"] + crop["h"]
        assert f"generation {evidence['generation']}" in top["notes"][0] and cited["digest"] in top["notes"][0]
        # the region names the words: the image service answers it
        assert room.get(image.split("#")[0].replace("/full/max/", f"/{region[5:]}/max/"),
                        headers=bearer("alice")).status_code == 200

        bib = bibtexparser.parse_string(room.get(f"/export/bibtex/queries/{qid}", headers=bearer("alice")).text)
        assert not bib.failed_blocks and len(bib.entries) == len(shown)
        fields = {f.key: f.value for f in bib.entries[0].fields}
        assert fields["iiif_region"] == region and fields["revision"] == revision and fields["sha256"] == cited["digest"]
        items = json.loads(room.get(f"/export/csl-json/queries/{qid}", headers=bearer("alice")).text)
        assert [i["URL"] for i in items] == [e["urls"][0] for e in entries]
        rows = list(csv.DictReader(io.StringIO(room.get(f"/export/csv/queries/{qid}", headers=bearer("alice")).text)))
        assert [row["doc_id"] for row in rows] == [d["doc_id"] for d in shown] and rows[0]["region"] == region

        one = rispy.loads(room.get(f"/export/ris/queries/{qid}?rank=1", headers=bearer("alice")).text)
        assert one == entries[:1]  # one document of the answer, its citation pinned the same
        assert room.get(f"/export/ris/queries/{qid}?rank=999", headers=bearer("alice")).status_code == 404
        assert room.get(f"/export/ris/queries/{qid}?rank=0", headers=bearer("alice")).status_code == 422

        html = room.get(f"/queries/{qid}", headers=bearer("alice")).text
        assert f'href="http://127.0.0.1:{room._base_url.port}/export/ris/queries/{qid}"' in html
        assert f'href="http://127.0.0.1:{room._base_url.port}/export/bibtex/queries/{qid}?rank=1"' in html
        page = room.get(f"/documents/{SCAN_DOC}", headers=bearer("alice")).text
        assert f"/export/bibtex/documents/{SCAN_DOC}" in page
        one = bibtexparser.parse_string(room.get(f"/export/bibtex/documents/{SCAN_DOC}", headers=bearer("alice")).text)
        assert [e.key for e in one.entries] == [SCAN_DOC.replace("/", "-")]


def test_an_export_is_refused_or_withdrawn_like_the_evidence(export_home, asked, tmp_path):
    from tasks.store.tombstones import add_tombstones

    qid = asked[("alice", SCAN_QUESTION)]
    export_home = copy_home(export_home, tmp_path / "home")  # its own: it changes the principals and deletes
    with live_room(export_home) as room:
        assert room.get(f"/export/ris/queries/{qid}", headers=bearer("bob")).status_code == 404  # not bob's
        assert room.get(f"/export/ris/documents/{TENANT_B_DOC}", headers=bearer("alice")).status_code == 404
        assert room.get(f"/export/ris/documents/{SCAN_DOC}", headers=bearer("bob")).status_code == 404
        unknown = room.get(f"/export/endnote/queries/{qid}", headers=bearer("alice"))
        assert unknown.status_code == 400 and "ris, bibtex, csl-json, csv" in unknown.text
        # alice loses the group: nothing of her answer is exported any more
        write_principals(export_home, {**PRINCIPALS, "alice": {"tenant": "default", "groups": ["staff"]}})
        r = room.get(f"/export/csl-json/queries/{qid}", headers=bearer("alice"))
        assert r.status_code == 200 and json.loads(r.text) == []
        write_principals(export_home, PRINCIPALS)
        # deleted: out of the answer's export and no document export, at once (before any purge)
        add_tombstones(StoreLayout.from_settings(MabillonSettings(home=export_home)), [SCAN_DOC], "test", "rights")
        text = room.get(f"/export/ris/queries/{qid}", headers=bearer("alice")).text
        assert SCAN_DOC not in text and "Morin" not in text and text.count("TY  - ") >= 1
        assert room.get(f"/export/ris/documents/{SCAN_DOC}", headers=bearer("alice")).status_code == 404
