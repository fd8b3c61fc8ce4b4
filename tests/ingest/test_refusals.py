"""Refused once, refused for good: a doc_id with control characters is quarantined with its reason
while the rest of the batch is published, and a scan without text is not OCRed again on every run
(its refusal is remembered by digest and by what decided it; changed settings read it again)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from flows.release import release
from schemas.lineage import ParsedDocument, Revision
from schemas.settings import ParseSettings, SandboxSettings
from tasks.ingest.acquire import AccessDefaults, parse_record_line
from tasks.ingest.identifiers import doc_id_problem
from tasks.ingest.parse import parse_revision
from tasks.ingest.sidecar import entry_from_row
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table
from tests.conftest import SAMPLE_RECORDS, settings_for

DEFAULTS = AccessDefaults(corpus=None, tenant="default", groups=("public",))

BAD_IDS = {"nul\x00id": "\\x00 NUL", "esc\x1b[31mrouge": "\\x1b ESC", "csi\x9b2J": "\\x9b CSI",
           "rlo\u202egnp.exe": "\\u202e RIGHT-TO-LEFT OVERRIDE", "deux\nlignes": "\\x0a line feed"}
CALLS: list[str] = []  # uris the parser was called on, in this process (the sandbox is off here)


def counted_parse(data: bytes, revision: Revision, settings: ParseSettings, pages=None) -> ParsedDocument:
    """The parse entry point (settings.sandbox.parser), counting its calls."""
    CALLS.append(revision.uri)
    return parse_revision(data, revision, settings, pages)


@pytest.mark.parametrize("doc_id", list(BAD_IDS))
def test_a_record_or_sidecar_doc_id_with_control_characters_is_refused_with_its_reason(doc_id):
    line = json.dumps({"doc_id": doc_id, "corpus": "c", "text": "Texte."})
    with pytest.raises(ValueError, match="holds control characters") as refused:
        parse_record_line(line, DEFAULTS)
    assert BAD_IDS[doc_id] in str(refused.value)
    assert not any(ch in str(refused.value) for ch in doc_id if not ch.isprintable())  # shown escaped
    with pytest.raises(ValueError, match="holds control characters"):
        entry_from_row({"file": "a.txt", "doc_id": doc_id})
    assert doc_id_problem("jo-1887-03-02/séance « 2 »") is None


def blank_scan(width: int = 600) -> bytes:
    from io import BytesIO

    out = BytesIO()
    Image.new("L", (width, 400), 255).save(out, "PNG", dpi=(300, 300))
    return out.getvalue()


@pytest.fixture(scope="module")
def versement(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("refusals")
    folder = root / "versement"
    folder.mkdir()
    records = [*SAMPLE_RECORDS[:2], *({"doc_id": d, "corpus": "c", "text": "Texte refusé."} for d in BAD_IDS)]
    (folder / "export.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    (folder / "lettre.txt").write_text("Lettre du préfet au maire sur le chemin vicinal.", "utf-8")
    (folder / "note.txt").write_text("Note dont l'identifiant est piégé.", "utf-8")
    (folder / "nom\x1b[2J.txt").write_text("Fichier au nom piégé.", "utf-8")
    (folder / "sidecar.json").write_text(json.dumps([{"file": "note.txt", "doc_id": "note\x1b]0;titre\x07"}]))
    (folder / "blanc.png").write_bytes(blank_scan())
    return folder, root / "home"


def settings_of(home: Path, **sandbox):
    return settings_for(home, sandbox=SandboxSettings(enabled=False, parser=f"{__name__}:counted_parse", **sandbox))


def scan_calls(folder: Path) -> int:
    return CALLS.count((folder / "blanc.png").resolve().as_uri())


@pytest.fixture(scope="module")
def first(versement):
    folder, home = versement
    return release(paths=[str(folder)], settings=settings_of(home))


def test_ids_with_control_characters_are_quarantined_and_the_rest_is_published(versement, first):
    folder, home = versement
    assert first.published and first.serving
    reasons = [q.reason for q in first.quarantined]
    for doc_id, named in BAD_IDS.items():
        assert any("holds control characters" in r and named in r for r in reasons), doc_id
    assert any("sidecar.json row 1" in r and "\\x1b ESC" in r for r in reasons)  # the sidecar's id
    assert any("'nom\\x1b[2J'" in r for r in reasons)  # a file's name
    assert not any(ch in r for r in reasons for ch in "\x00\x1b\x9b\u202e")
    layout = StoreLayout.from_settings(settings_of(home))
    served = set(read_lineage_table(layout, first.generation, "sources")["doc_id"].to_pylist())
    assert served == {"jo-1887-03-02", "gaulois-1887-03-03", "lettre"}


def test_an_unchanged_refused_scan_is_not_parsed_again_until_what_decides_it_changes(versement, first):
    folder, home = versement
    blank = (folder / "blanc.png").resolve().as_uri()
    reasons = {q.uri: q.reason for q in first.quarantined}
    assert "no text found" in reasons[blank] and scan_calls(folder) == 1

    again = release(paths=[str(folder)], settings=settings_of(home))
    reason = {q.uri: q.reason for q in again.quarantined}[blank]
    assert scan_calls(folder) == 1, "the refused scan was parsed (OCRed) again"
    assert "no text found" in reason and "not parsed again" in reason
    assert not again.published and again.run.ocr_pages == 0

    release(paths=[str(folder)], settings=settings_of(home, max_cpu_s=1799))  # other limits
    assert scan_calls(folder) == 2
    (folder / "blanc.png").write_bytes(blank_scan(width=640))  # other bytes
    release(paths=[str(folder)], settings=settings_of(home))
    assert scan_calls(folder) == 3


def test_documents_prints_an_id_published_before_the_refusal_escaped(versement, first, monkeypatch, capsys):
    """An id with escapes published by an older release is listed, and shown escaped."""
    import tasks.store.documents as documents
    from flows.cli.main import main

    real = documents.list_documents

    def with_an_old_id(*args, **kwargs):
        return [*real(*args, **kwargs), documents.DocumentRow(
            doc_id="vieux\x1b[2J\x1b]0;pwned\x07", corpus="c\x9b", date=None, title="titre\nfaux\x1b[31m",
            tenant="default", groups=["public"], chunks=1)]
    monkeypatch.setattr(documents, "list_documents", with_an_old_id)
    assert main(["documents", "--home", str(versement[1])]) == 0
    out = capsys.readouterr().out
    assert not any(ch in out for ch in "\x1b\x07\x9b"), out
    assert "vieux\\x1b[2J\\x1b]0;pwned\\x07  [c\\x9b, undated]  1 chunk  titre\\x0afaux\\x1b[31m" in out
    assert "jo-1887-03-02" in out and len(out.strip().splitlines()) == 5
    assert main(["documents", "--json", "--home", str(versement[1])]) == 0
    out = capsys.readouterr().out
    assert not any(ch in out for ch in "\x1b\x07\x9b") and json.loads(out)["documents"][-1]["corpus"] == "c\x9b"
