"""The input zoo through the real release flow: every hostile input is quarantined with a clear
reason (or read, where it can be read losslessly), the rest of the batch is published, nothing
is fetched from the network, nothing outside the folder is read, and the run does not crash."""
from __future__ import annotations

import http.server
import os
import threading
from pathlib import Path

import pytest

from flows.release import release
from schemas.settings import InspectionLimits
from tasks.ingest.inspect import inspect_revision
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table
from tests.conftest import settings_for
from tests.fixtures.make_samples import revision_for
from tests.hostile import zoo


class CountingHandler(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        CountingHandler.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"fetched")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def resource_server():
    """A loopback server the zoo's HTML points every script, image and frame at."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("case", [c for c in zoo.cases("http://127.0.0.1:9")
                                  if c.outcome == "quarantined" and c.reason
                                  and not c.name.startswith(("doublons/", "alto/invalide"))],
                         ids=lambda c: c.name)
def test_each_hostile_file_is_refused_at_inspection_with_its_reason(case):
    accepted, refused = inspect_revision(revision_for(Path(case.name).name, case.data), case.data,
                                         InspectionLimits())
    assert accepted is None, case.name
    assert case.reason in refused.reason


def test_the_pixel_bomb_is_refused_from_its_header_alone():
    data = zoo.pixel_bomb_png()
    assert len(data) < 100_000  # 10¹⁰ pixels announced in a few kB
    _, refused = inspect_revision(revision_for("bombe.png", data), data, InspectionLimits())
    assert refused.reason == "image bomb: its header announces 10000000000 pixels, over the limit of 60000000"


@pytest.fixture(scope="module")
def zoo_run(tmp_path_factory, resource_server):
    root = tmp_path_factory.mktemp("zoo")
    folder = root / "versement"
    cases = zoo.write_zoo(folder, resource_server)
    outside = root / "hors-du-versement.txt"
    outside.write_text("Texte d'un autre fonds, qui ne doit pas être lu.", "utf-8")
    os.symlink(outside, folder / "lien.txt")  # a link out of the folder
    os.symlink(folder, folder / "boucle")  # a link looping back into it
    home = root / "home"
    home.mkdir()
    result = release(paths=[str(folder)], settings=settings_for(home))
    return folder, home, cases, result


@pytest.mark.slow
def test_the_zoo_is_published_except_what_it_must_refuse(zoo_run):
    folder, home, cases, result = zoo_run
    assert result.published and result.serving
    reasons = {q.uri: q.reason for q in result.quarantined}
    for case in cases:
        uri = (folder / case.name).resolve().as_uri()
        if case.outcome == "quarantined":
            assert uri in reasons, f"{case.name} was not quarantined"
            assert reasons[uri].strip() and (case.reason is None or case.reason in reasons[uri]), \
                (case.name, reasons[uri])
        else:
            assert uri not in reasons, (case.name, reasons.get(uri))
    layout = StoreLayout.from_settings(settings_for(home))
    sources = read_lineage_table(layout, result.generation, "sources").to_pylist()
    served = {s["doc_id"] for s in sources}
    published = {c.doc_id for c in cases if c.outcome == "published"}
    assert published <= served
    assert served == published | {"zoo-record-3"}, served - published  # nothing else got in


@pytest.mark.slow
def test_the_documents_with_no_text_are_quarantined_not_fatal(zoo_run):
    folder, _, _, result = zoo_run
    reasons = {q.uri: q.reason for q in result.quarantined}
    # the truncated PDF and the 200-inch blank page: their own, named reasons
    for name in ("pdf/tronque.pdf", "pdf/page-geante.pdf"):
        assert reasons[(folder / name).resolve().as_uri()]


@pytest.mark.slow
def test_bad_lines_of_an_export_are_reported_by_number_and_the_others_ingested(zoo_run):
    folder, _, _, result = zoo_run
    export = (folder / "export.jsonl").resolve().as_uri()
    by_line = {q.line: q.reason for q in result.quarantined if q.uri.startswith(export + "#L")}
    assert set(by_line) == set(zoo.JSONL_REFUSED)
    for line, words in zoo.JSONL_REFUSED.items():
        assert by_line[line].startswith(f"line {line}: ") and words in by_line[line]


@pytest.mark.slow
def test_a_sidecar_cannot_reach_outside_the_folder(zoo_run):
    folder, home, _, result = zoo_run
    reasons = [q.reason for q in result.quarantined]
    for path, words in zoo.SIDECAR_REFUSED.items():
        assert any(path in r and words in r for r in reasons), path
    links = {q.uri: q.reason for q in result.quarantined if "symbolic link" in q.reason}
    assert set(links) == {(folder / "lien.txt").as_uri(), (folder / "boucle").as_uri()}
    layout = StoreLayout.from_settings(settings_for(home))
    texts = " ".join(read_lineage_table(layout, result.generation, "pages")["raw_text"].to_pylist())
    assert "autre fonds" not in texts and "root:" not in texts


@pytest.mark.slow
def test_html_scripts_and_references_are_never_fetched_or_run(zoo_run, resource_server):
    _, home, _, result = zoo_run
    assert CountingHandler.hits == []
    layout = StoreLayout.from_settings(settings_for(home))
    pages = {p["revision_id"]: p for p in read_lineage_table(layout, result.generation, "pages").to_pylist()}
    html = [p for p in pages.values() if p["parser"] == "docling-html"]
    assert len(html) == 1 and "transféré place de l'Église" in html[0]["raw_text"]
    assert "injecté" not in html[0]["raw_text"] and "fetch(" not in html[0]["raw_text"]


@pytest.mark.slow
def test_text_in_other_encodings_is_read_as_written(zoo_run):
    _, home, _, result = zoo_run
    layout = StoreLayout.from_settings(settings_for(home))
    revisions = {r["doc_id"]: r["revision_id"]
                 for r in read_lineage_table(layout, result.generation, "revisions").to_pylist()}
    pages = {p["revision_id"]: p for p in read_lineage_table(layout, result.generation, "pages").to_pylist()}
    for doc_id, parser, words in [("bons/latin1", "plaintext/cp1252", "Procès-verbal de la séance"),
                                  ("bons/utf16", "plaintext/utf-16", "Procès-verbal de la séance"),
                                  ("bons/cp1252", "plaintext/cp1252", "Reçu 12 € pour l’école — « quittance »")]:
        page = pages[revisions[doc_id]]
        assert page["parser"] == parser and words in page["raw_text"], doc_id


@pytest.mark.slow
def test_alto_boxes_outside_the_page_are_clipped_or_dropped_and_the_text_kept(zoo_run):
    _, home, _, result = zoo_run
    layout = StoreLayout.from_settings(settings_for(home))
    rev = next(r["revision_id"] for r in read_lineage_table(layout, result.generation, "revisions").to_pylist()
               if r["doc_id"] == "bons/hors-page")
    page = next(p for p in read_lineage_table(layout, result.generation, "pages").to_pylist()
                if p["revision_id"] == rev)
    assert "réparation du toit de l'école" in " ".join(page["raw_text"].split())
    boxes = [e["bbox"] for e in read_lineage_table(layout, result.generation, "elements").to_pylist()
             if e["revision_id"] == rev and e["bbox"] is not None]
    assert boxes and all(0 <= x0 < x1 <= page["width"] and 0 <= y0 < y1 <= page["height"]
                         for x0, y0, x1, y1 in boxes)


@pytest.mark.slow
def test_a_repaired_cross_reference_table_keeps_the_text(zoo_run):
    _, home, _, result = zoo_run
    layout = StoreLayout.from_settings(settings_for(home))
    rev = next(r["revision_id"] for r in read_lineage_table(layout, result.generation, "revisions").to_pylist()
               if r["doc_id"] == "bons/xref-casse")
    page = next(p for p in read_lineage_table(layout, result.generation, "pages").to_pylist()
                if p["revision_id"] == rev)
    assert page["parser"] == "pymupdf-text" and zoo.GOOD_TEXT[:60] in " ".join(page["raw_text"].split())
