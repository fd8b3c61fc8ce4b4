"""HTML and DOCX through docling: structure kept as elements; HTML never fetches anything."""
from __future__ import annotations

import socket

import pytest

from flows.make_sample import SAMPLE_DIR
from schemas.settings import MabillonSettings
from tasks.ingest.parse.docx import parse_docx
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.html import parse_html
from tests.fixtures import make_samples as fx

SETTINGS = MabillonSettings()


def kinds_and_texts(page):
    return [(e.kind, page.raw_text[e.char_start:e.char_end]) for e in page.elements]


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection is recorded and fails."""
    attempts: list = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access attempted during parsing")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


def test_html_keeps_structure_and_never_fetches_remote_resources(no_network):
    data = fx.html_with_remote_resources()
    page = parse_html(data, fx.revision_for("avis.html", data), SETTINGS).pages[0]
    assert no_network == []
    assert page.parser == "docling-html"
    elements = kinds_and_texts(page)
    assert ("title", "Avis de la mairie") in elements
    assert ("paragraph", "Le marché du jeudi est transféré place de l'Église.") in elements
    assert ("list_item", "Fermeture à midi") in elements
    assert "fetch(" not in page.raw_text and "tracker" not in page.raw_text


def test_bundled_html_sample_gives_headings_lists_and_table_rows(no_network):
    data = (SAMPLE_DIR / "inventaire-archives.html").read_bytes()
    page = parse_html(data, fx.revision_for("inventaire.html", data), SETTINGS).pages[0]
    elements = kinds_and_texts(page)
    assert ("heading", "Série D : administration générale") in elements
    assert ("table", "Cote | Contenu | Dates\nG 1 | Plan cadastral, tableau d'assemblage | 1827\n"
                     "G 2 | États de sections | 1828") in elements
    assert page.raw_text.count("Inventaire sommaire") == 1  # <title> is not repeated
    assert "années 1815 et 1816, dont" in page.raw_text  # inline bold joined back


def test_docx_headings_paragraphs_tables_and_lists():
    data = fx.docx_with_table()
    page = parse_docx(data, fx.revision_for("etat.docx", data), SETTINGS).pages[0]
    assert page.parser == "docling-docx" and page.parser_version.startswith("docling-")
    assert kinds_and_texts(page) == [
        ("heading", "État des grains"), ("paragraph", "Relevé dressé par les commissaires."),
        ("table", "Cultivateur | Seigle\nMorin | 12 boisseaux"), ("list_item", "Premier article")]
    assert page.normalized_text.split() == page.raw_text.split()


def test_a_broken_docx_is_refused():
    data = fx.docx()[:2000]
    with pytest.raises(ParseRefused, match="malformed DOCX"):
        parse_docx(data, fx.revision_for("x.docx", data), SETTINGS)
