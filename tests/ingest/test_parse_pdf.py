"""PDF: the text layer when it is reliable, OCR of the render when it is not, page by page."""
from __future__ import annotations

import subprocess
import sys

import pymupdf
import pytest

from flows.make_sample import source_text
from schemas.settings import PROJECT_ROOT, MabillonSettings
from tasks.ingest.parse.cer import character_error_rate
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.pdf import parse_pdf, unreliable_reason
from tasks.ingest.render import render_dpi, render_pdf_page
from tests.fixtures import make_samples as fx

SETTINGS = MabillonSettings()


def parse(data: bytes):
    return parse_pdf(data, fx.revision_for("doc.pdf", data), SETTINGS)


def test_digital_pdf_uses_the_text_layer_with_paragraph_and_line_boxes():
    doc = parse(fx.two_page_digital_pdf())
    assert [p.page_no for p in doc.pages] == [1, 2]
    first = doc.pages[0]
    assert first.parser == "pymupdf-text" and first.ocr_confidence is None
    assert (first.width, first.height) == (595, 842) and first.rotation == 0
    assert character_error_rate(source_text(fx.DIGITAL), first.raw_text) < 0.01
    assert "connaître" in first.raw_text
    kinds = {e.kind for e in first.elements}
    assert kinds == {"paragraph", "line"}
    for element in first.elements:
        x0, y0, x1, y1 = element.bbox
        assert 0 <= x0 < x1 <= first.width and 0 <= y0 < y1 <= first.height
        assert first.raw_text[element.char_start:element.char_end].strip()
    lines = [first.raw_text[e.char_start:e.char_end] for e in first.elements if e.kind == "line"]
    assert "\n".join(lines).split() == first.raw_text.split()


def test_scanned_pdf_is_ocred_with_boxes_in_page_points():
    doc = parse(fx.scanned_two_page_pdf())
    assert [p.parser for p in doc.pages] == ["tesseract/fra", "tesseract/fra"]
    page = doc.pages[0]
    assert page.dpi == 300 and 0.5 < page.ocr_confidence <= 1
    assert character_error_rate(source_text(fx.STRAIGHT), page.raw_text) < 0.05
    assert character_error_rate(source_text("affiche-1848"), doc.pages[1].raw_text) < 0.05
    for element in page.elements:
        x0, y0, x1, y1 = element.bbox
        assert 0 <= x0 < x1 <= page.width + 1 and 0 <= y0 < y1 <= page.height + 1


def test_mixed_pdf_chooses_per_page():
    doc = parse(fx.mixed_pdf())
    assert [p.parser for p in doc.pages] == ["pymupdf-text", "tesseract/fra"]


@pytest.mark.parametrize("text, expected", [
    ("court", "characters"),
    ("\ufffd" * 30 + "a" * 30, "unmapped glyphs"),
    ("•" * 40 + "ab", "letters or digits"),
    ("Le conseil municipal s'est réuni au lieu ordinaire.", None),
])
def test_unreliable_text_layers_are_recognised(text, expected):
    reason = unreliable_reason(text, min_chars=20)
    assert (reason is None) if expected is None else (expected in reason)


def test_encrypted_and_malformed_pdfs_are_refused_by_the_parser_too():
    with pytest.raises(ParseRefused, match="encrypted PDF"):
        parse(fx.encrypted())
    with pytest.raises(ParseRefused, match="malformed PDF"):
        parse(b"%PDF-1.4 nothing else")


def test_render_records_dpi_and_rotation_and_lowers_dpi_under_the_pixel_limit():
    doc = pymupdf.open(stream=fx.two_page_digital_pdf(), filetype="pdf")
    doc[0].set_rotation(90)
    render = render_pdf_page(doc[0], dpi=300, max_pixels=2_000_000)
    assert render.rotation == 90
    assert render.dpi == render_dpi(doc[0].rect, 300, 2_000_000) < 300
    assert render.image.width * render.image.height <= 2_000_000
    assert (render.width, render.height) == (842, 595)  # the visible box, turned
    assert render.scale == pytest.approx(72 / render.dpi)


def test_reading_pdfs_loads_no_layout_model():
    """pymupdf imports its layout and pymupdf4llm add-ons when installed, and both open
    onnxruntime at import (tasks/pdf_library.py); we never call them, so a process that parses
    PDFs does without them, and pymupdf still opens and makes PDFs."""
    code = ("import sys\n"
            "from tasks.ingest.parse.pdf import parse_pdf\n"
            "from tasks.pdf_library import pymupdf\n"
            "doc = pymupdf.open(); doc.new_page()\n"
            "print([m for m in ('pymupdf.layout', 'onnxruntime') if sys.modules.get(m)], doc.page_count)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "1"], done.stdout
