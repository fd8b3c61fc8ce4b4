"""OCR of page images: text within 5% CER of what was rendered, word boxes and confidences kept."""
from __future__ import annotations

import pytest
from PIL import Image, ImageDraw, ImageFont

from flows.make_sample import FONT_FILE, source_text
from schemas.settings import MabillonSettings, OcrSettings
from tasks.ingest.parse.cer import character_error_rate
from tasks.ingest.parse.image import parse_image
from tasks.ingest.parse.normalize import normalize_text
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.ocr import assemble, ocr_pages
from tasks.ingest.render import PageRender, image_pages
from tests.fixtures import make_samples as fx

SETTINGS = MabillonSettings()


@pytest.fixture(scope="module")
def straight():
    data = fx.straight_scan("PNG")
    return parse_image(data, fx.revision_for("registre.png", data), SETTINGS).pages[0]


@pytest.fixture(scope="module")
def rotated():
    data = fx.rotated_noisy_scan("TIFF")
    return parse_image(data, fx.revision_for("etat-civil.tif", data), SETTINGS).pages[0]


def test_straight_scan_is_read_within_five_percent_cer(straight):
    assert character_error_rate(source_text(fx.STRAIGHT), straight.raw_text) < 0.05


def test_scan_rotated_one_degree_with_noise_is_read_within_five_percent_cer(rotated):
    assert character_error_rate(source_text(fx.ROTATED), rotated.raw_text) < 0.05


def test_ocr_page_records_parser_confidence_and_resolution(straight):
    assert straight.parser == "tesseract/fra"
    assert straight.parser_version.startswith("tesseract-5")
    assert 0.5 < straight.ocr_confidence <= 1.0
    assert straight.dpi == 300
    assert (straight.width, straight.height) == (2480, 3509)  # A4 at 300 dpi, in pixels
    assert "Sœurs" in straight.raw_text  # the ligature survives rendering and OCR


def test_word_and_line_elements_point_into_the_raw_text_with_boxes_on_the_page(straight):
    words = [e for e in straight.elements if e.kind == "word"]
    lines = [e for e in straight.elements if e.kind == "line"]
    assert len(words) == len(straight.raw_text.split())
    assert [straight.raw_text[w.char_start:w.char_end] for w in words] == straight.raw_text.split()
    for element in words + lines:
        x0, y0, x1, y1 = element.bbox
        assert 0 <= x0 < x1 <= straight.width and 0 <= y0 < y1 <= straight.height
        assert 0 <= element.confidence <= 1
    for line in lines:
        inside = [w for w in words if line.char_start <= w.char_start and w.char_end <= line.char_end]
        assert "\n" not in straight.raw_text[line.char_start:line.char_end] and inside


def test_normalised_text_is_derived_from_the_raw_text_which_keeps_the_line_breaks(rotated):
    assert "\n" in rotated.raw_text
    assert rotated.normalized_text == normalize_text(rotated.raw_text)


def test_assemble_separates_words_lines_and_paragraphs_and_scales_boxes():
    rows = [  # level, block, par, line, word, left, top, width, height, conf, text
        (5, 1, 1, 1, 1, 10, 10, 40, 20, 96.0, "Le"), (5, 1, 1, 1, 2, 60, 10, 80, 20, 90.0, "maire"),
        (5, 1, 1, 2, 1, 10, 40, 60, 20, 80.0, "expose"), (4, 1, 2, 1, 0, 0, 0, 0, 0, -1, ""),
        (5, 1, 2, 1, 1, 10, 90, 50, 20, -1, "que"), (5, 2, 1, 1, 1, 10, 150, 30, 20, 70.0, " "),
    ]
    keys = ["level", "block_num", "par_num", "line_num", "word_num", "left", "top", "width",
            "height", "conf", "text"]
    data = {k: [r[i] for r in rows] for i, k in enumerate(keys)} | {"page_num": [1] * len(rows)}
    result = assemble(data, scale=0.5)
    assert result.text == "Le maire\nexpose\n\nque"
    first_line = result.elements[0]
    assert (first_line.kind, first_line.char_start, first_line.char_end) == ("line", 0, 8)
    assert first_line.bbox == (5.0, 5.0, 70.0, 15.0)
    que = result.elements[-1]
    assert result.text[que.char_start:que.char_end] == "que" and que.confidence is None
    # confidence weighted by word length: (0.96*2 + 0.90*5 + 0.80*6) / 13
    assert result.confidence == pytest.approx((0.96 * 2 + 0.90 * 5 + 0.80 * 6) / 13)


def _line_image(text: str) -> PageRender:
    image = Image.new("L", (1400, 120), 255)
    ImageDraw.Draw(image).text((20, 30), text, fill=0, font=ImageFont.truetype(str(FONT_FILE), 48))
    return PageRender(page_no=0, image=image, dpi=300, rotation=0, width=1400, height=120, scale=1.0)


def test_parallel_ocr_keeps_page_order_and_matches_one_worker():
    texts = ["Premier registre", "Deuxième liasse", "Troisième carton", "Quatrième dossier"]
    renders = [PageRender(**{**_line_image(t).__dict__, "page_no": i + 1}) for i, t in enumerate(texts)]
    one = ocr_pages(iter(renders), OcrSettings(workers=1))
    two = ocr_pages(iter(renders), OcrSettings(workers=2))
    assert [p.page_no for p in two] == [1, 2, 3, 4]
    assert [p.raw_text for p in two] == [p.raw_text for p in one]
    assert [p.raw_text for p in two] == texts


def test_multi_frame_tiff_gives_one_page_per_frame():
    import io
    frames = [_line_image("Folio un").image, _line_image("Folio deux").image]
    out = io.BytesIO()
    frames[0].save(out, format="TIFF", save_all=True, append_images=frames[1:], dpi=(300, 300))
    pages = list(image_pages(out.getvalue()))
    assert [p.page_no for p in pages] == [1, 2] and pages[1].dpi == 300


def test_an_image_that_cannot_be_decoded_is_refused():
    data = fx.straight_scan("PNG")[:3000]
    with pytest.raises(ParseRefused, match="malformed image"):
        parse_image(data, fx.revision_for("x.png", data), SETTINGS)


def test_a_page_whose_ocr_times_out_is_kept_empty_with_the_reason(monkeypatch):
    import pytesseract

    def too_slow(*args, **kwargs):
        raise RuntimeError("Tesseract process timeout")

    monkeypatch.setattr(pytesseract, "image_to_data", too_slow)
    pages = ocr_pages([_line_image("Registre")], OcrSettings(workers=1, page_timeout_s=5))
    assert pages[0].raw_text == "" and pages[0].empty_reason == "OCR stopped after 5 s"


def test_tesseract_openmp_threads_follow_the_setting(monkeypatch):
    import os

    monkeypatch.delenv("OMP_THREAD_LIMIT", raising=False)
    # not the default (1), so the assertion shows the setting was read
    ocr_pages([_line_image("Cote")], OcrSettings(workers=1, tesseract_threads=3))
    assert os.environ["OMP_THREAD_LIMIT"] == "3"
