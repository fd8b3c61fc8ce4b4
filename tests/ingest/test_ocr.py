"""OCR of page images: text within 5% CER of what was rendered, word boxes and confidences kept;
pages scanned sideways or upside down are turned and read upright, the turn recorded."""
from __future__ import annotations

import pytest
from PIL import Image, ImageDraw, ImageFont

from flows.make_sample import FONT_FILE, image_bytes, render_scan, scanned_pdf, source_text
from schemas.settings import MabillonSettings, OcrSettings
from tasks.ingest.parse.cer import character_error_rate
from tasks.ingest.parse.image import parse_image
from tasks.ingest.parse.normalize import normalize_text
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.ocr import assemble, ocr_pages
from tasks.ingest.parse.pdf import parse_pdf
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


# --- pages scanned sideways or upside down -------------------------------------------------

TURNED_DPI = 200  # OSD is reliable from 200 dpi (OcrSettings.osd_min_confidence); faster than 300


def _turned_scan(degrees: int, text: str | None = None) -> Image.Image:
    """The page as a scanner gives it when fed turned `degrees` counter-clockwise."""
    image = render_scan(text or source_text(fx.STRAIGHT), dpi=TURNED_DPI)
    turned = image.rotate(degrees, expand=True) if degrees else image
    turned.info["dpi"] = (TURNED_DPI, TURNED_DPI)
    return turned


@pytest.fixture
def osd_calls(monkeypatch):
    """Every call to tesseract's orientation detection, still run for real: (outcome, kwargs)."""
    import pytesseract

    calls: list[tuple[object, dict]] = []
    real = pytesseract.image_to_osd

    def counted(*args, **kwargs):
        try:
            result = real(*args, **kwargs)
        except pytesseract.TesseractError as exc:
            calls.append((exc, kwargs))
            raise
        calls.append((result, kwargs))
        return result

    monkeypatch.setattr(pytesseract, "image_to_osd", counted)
    return calls


@pytest.mark.parametrize("scanned_turn, upright_turn", [(90, 90), (180, 180), (270, 270)])
def test_an_image_scanned_turned_is_read_upright_and_the_turn_is_recorded(scanned_turn, upright_turn):
    # scanned a quarter counter-clockwise (PIL's 90) → a quarter clockwise puts it upright
    data = image_bytes(_turned_scan(scanned_turn), "PNG")
    page = parse_image(data, fx.revision_for("tourne.png", data), SETTINGS).pages[0]
    assert character_error_rate(source_text(fx.STRAIGHT), page.raw_text) < 0.05
    assert page.rotation == upright_turn
    # boxes are those of the page as read: upright, so width and height are A4 portrait again
    assert page.width < page.height
    for element in page.elements:
        x0, y0, x1, y1 = element.bbox
        assert 0 <= x0 < x1 <= page.width and 0 <= y0 < y1 <= page.height


def test_a_scanned_pdf_page_turned_sideways_is_read_upright():
    data = scanned_pdf([_turned_scan(90)])
    settings = SETTINGS.model_copy(update={"ocr": OcrSettings(dpi=TURNED_DPI)})
    page = parse_pdf(data, fx.revision_for("tourne.pdf", data), settings).pages[0]
    assert page.parser == "tesseract/fra" and page.rotation == 90
    assert character_error_rate(source_text(fx.STRAIGHT), page.raw_text) < 0.05
    assert (page.width, page.height) == pytest.approx((595.0, 842.0), abs=1)  # A4 portrait, points


def test_a_straight_page_does_not_run_orientation_detection(osd_calls):
    data = image_bytes(_turned_scan(0), "PNG")
    page = parse_image(data, fx.revision_for("droit.png", data), SETTINGS).pages[0]
    assert osd_calls == [] and page.rotation == 0
    assert character_error_rate(source_text(fx.STRAIGHT), page.raw_text) < 0.05


def test_a_page_with_almost_no_text_keeps_its_first_reading_when_orientation_detection_fails(osd_calls):
    import pytesseract

    render = _line_image("Cote 12")
    sideways = render.image.rotate(90, expand=True)
    render = PageRender(page_no=1, image=sideways, dpi=300, rotation=0,
                        width=sideways.width, height=sideways.height, scale=1.0)
    page = ocr_pages([render], OcrSettings(workers=1))[0]
    assert len(osd_calls) == 1 and isinstance(osd_calls[0][0], pytesseract.TesseractError)
    assert page.rotation == 0 and page.raw_text and page.empty_reason is None
    assert (page.width, page.height) == (sideways.width, sideways.height)


def test_orientation_detection_runs_under_the_thread_limit_and_the_page_time_budget(monkeypatch):
    import os

    import pytesseract

    seen: list[tuple[str | None, float]] = []

    def fake_osd(image, **kwargs):
        seen.append((os.environ.get("OMP_THREAD_LIMIT"), kwargs["timeout"]))
        return {"rotate": 0, "orientation_conf": 0.0}

    monkeypatch.setattr(pytesseract, "image_to_osd", fake_osd)
    monkeypatch.delenv("OMP_THREAD_LIMIT", raising=False)
    upside_down = _line_image("Registre des naissances").image.rotate(180)
    render = PageRender(page_no=1, image=upside_down, dpi=300, rotation=0, width=1400, height=120,
                        scale=1.0)
    page = ocr_pages([render], OcrSettings(workers=1, tesseract_threads=2, page_timeout_s=30))[0]
    assert len(seen) == 1 and seen[0][0] == "2" and 0 < seen[0][1] <= 30
    assert page.rotation == 0  # OSD saw no turn: the first reading stands


def test_a_wrong_turn_from_orientation_detection_is_rejected_by_the_confidence_check(monkeypatch):
    import pytesseract

    monkeypatch.setattr(pytesseract, "image_to_osd",
                        lambda image, **kwargs: {"rotate": 180, "orientation_conf": 30.0})
    # a threshold above any confidence sends even this straight line through OSD
    settings = OcrSettings(workers=1, osd_below_confidence=1.01)
    page = ocr_pages([_line_image("Registre des naissances")], settings)[0]
    assert page.rotation == 0 and page.raw_text == "Registre des naissances"


def test_exif_orientation_is_recorded_clockwise_like_pdf_rotate():
    import io

    image = _turned_scan(0, "Folio un").resize((200, 100))
    exif = Image.Exif()
    exif[0x0112] = 6  # EXIF "rotate 90 CW to display"
    out = io.BytesIO()
    image.save(out, format="JPEG", exif=exif)
    page = next(image_pages(out.getvalue()))
    assert page.rotation == 90 and (page.width, page.height) == (100, 200)
