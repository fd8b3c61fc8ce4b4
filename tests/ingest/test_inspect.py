"""Inspection: the bytes decide the media type; what must not be parsed is quarantined with a reason."""
from __future__ import annotations

import pytest

from schemas.settings import InspectionLimits
from tasks.ingest.inspect import inspect_revision, sniff_media_type
from tests.fixtures import make_samples as fx

LIMITS = InspectionLimits()
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def inspect(name: str, data: bytes, limits: InspectionLimits = LIMITS):
    return inspect_revision(fx.revision_for(name, data), data, limits)


def test_media_types_are_sniffed_from_the_bytes():
    assert sniff_media_type(fx.two_page_digital_pdf()) == "application/pdf"
    assert sniff_media_type(fx.straight_scan("PNG")) == "image/png"
    assert sniff_media_type(fx.straight_scan("JPEG")) == "image/jpeg"
    assert sniff_media_type(fx.straight_scan("TIFF")) == "image/tiff"
    assert sniff_media_type(fx.docx()) == DOCX
    assert sniff_media_type(fx.alto()) == "application/alto+xml"
    assert sniff_media_type(fx.html_with_remote_resources()) == "text/html"
    assert sniff_media_type("Procès-verbal de la séance.".encode()) == "text/plain"
    assert sniff_media_type(b'<?xml version="1.0"?><!-- x --><html xmlns="http://www.w3.org/1999/xhtml"/>') == "text/html"
    assert sniff_media_type(b'<?xml version="1.0"?><mets:mets xmlns:mets="x"/>') == "application/xml"


@pytest.mark.parametrize("name, data, media_type", [
    ("lettre.pdf", fx.two_page_digital_pdf(), "application/pdf"),
    ("scan.png", fx.straight_scan("PNG"), "image/png"),
    ("scan.tif", fx.straight_scan("TIFF"), "image/tiff"),
    ("note.docx", fx.docx(), DOCX),
    ("journal.xml", fx.alto(), "application/alto+xml"),
    ("page.html", fx.html_with_remote_resources(), "text/html"),
    # text-like types may stand for one another: an HTML page saved as .txt is parsed as HTML
    ("page.txt", fx.html_with_remote_resources(), "text/html"),
])
def test_acceptable_inputs_are_accepted_with_their_sniffed_type(name, data, media_type):
    accepted, refused = inspect(name, data)
    assert refused is None
    assert accepted.media_type == media_type


@pytest.mark.parametrize("name, data, reason", [
    ("confidentiel.pdf", fx.encrypted(), "encrypted PDF"),
    ("vide.txt", b"", "empty file"),
    ("blanc.txt", b"  \n\t\n", "empty file"),
    ("photo.jpg", fx.disguised_as_jpeg(), "disguised file: named as image/jpeg"),
    ("notes.txt", fx.two_page_digital_pdf(), "disguised file: named as text/plain but its bytes are application/pdf"),
    ("casse.pdf", fx.malformed_pdf(), "malformed PDF"),
    ("script.pdf", fx.pdf_with_javascript(), "active content"),
    ("macro.docx", fx.docx_with_macros(), "active content: Word document with macros"),
    ("bombe.docx", fx.docx_bomb(), "zip bomb"),
    ("entites.xml", fx.alto_with_entities(), "<!DOCTYPE> declaration"),
    ("inconnu.bin", fx.disguised_as_jpeg(), "unrecognised binary content"),
    ("tronque.png", fx.straight_scan("PNG")[:5000], "malformed image"),
    ("entete.png", b"\x89PNG\r\n\x1a\n" + bytes(50), "malformed image: the header cannot be read"),
])
def test_refused_inputs_are_quarantined_with_their_reason(name, data, reason):
    accepted, refused = inspect(name, data)
    assert accepted is None
    assert reason in refused.reason
    assert refused.uri.endswith(name)


def test_page_limit_refuses_a_long_pdf():
    accepted, refused = inspect("long.pdf", fx.two_page_digital_pdf(), InspectionLimits(max_pages=1))
    assert accepted is None and "2 pages exceeds the limit of 1" in refused.reason


def test_pixel_limit_refuses_an_oversized_image_before_decoding_it():
    accepted, refused = inspect("grand.png", fx.straight_scan("PNG"), InspectionLimits(max_pixels=1_000_000))
    assert accepted is None and "exceeds the limit of 1000000" in refused.reason


def test_byte_limit_refuses_a_large_file():
    data = fx.two_page_digital_pdf()
    accepted, refused = inspect("gros.pdf", data, InspectionLimits(max_bytes=len(data) - 1))
    assert accepted is None and f"{len(data)} bytes exceeds" in refused.reason


def test_a_page_box_over_the_limit_is_refused_before_anything_renders_it():
    accepted, refused = inspect("geante.pdf", fx.giant_blank_pdf())
    assert accepted is None
    assert refused.reason == "PDF page 1 is 200 × 200 in, over the limit of 100 in a side"
    accepted, refused = inspect("plan.pdf", fx.giant_blank_pdf(60), InspectionLimits(max_page_inches=100))
    assert refused is None  # a large plan (60 in) under the limit is accepted
