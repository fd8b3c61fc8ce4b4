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
from tasks.ingest.parse import ocr
from tasks.ingest.parse.ocr import OcrUnavailable, OcrWord, assemble, denoise, ocr_pages
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
    rows = [  # block, paragraph, line, left, top, right, bottom, confidence, text
        (1, 1, 1, 10, 10, 50, 30, 96.0, "Le"), (1, 1, 1, 60, 10, 140, 30, 90.0, "maire"),
        (1, 1, 2, 10, 40, 70, 60, 80.0, "expose"), (1, 2, 1, 10, 90, 60, 110, -1.0, "que"),
    ]
    words = [OcrWord(block=b, paragraph=p, line=n, box=(x0, y0, x1, y1), confidence=c, text=t)
             for b, p, n, x0, y0, x1, y1, c, t in rows]
    result = assemble(words, scale=0.5)
    assert result.text == "Le maire\nexpose\n\nque"
    first_line = result.elements[0]
    assert (first_line.kind, first_line.char_start, first_line.char_end) == ("line", 0, 8)
    assert first_line.bbox == (5.0, 5.0, 70.0, 15.0)
    que = result.elements[-1]
    assert result.text[que.char_start:que.char_end] == "que" and que.confidence is None
    # confidence weighted by word length: (0.96*2 + 0.90*5 + 0.80*6) / 13
    assert result.confidence == pytest.approx((0.96 * 2 + 0.90 * 5 + 0.80 * 6) / 13)


def test_words_come_with_tesseracts_block_paragraph_and_line_numbers():
    two_paragraphs = Image.new("L", (1400, 400), 255)
    draw = ImageDraw.Draw(two_paragraphs)
    font = ImageFont.truetype(str(FONT_FILE), 48)
    draw.text((20, 30), "Premier alinéa du registre", fill=0, font=font)
    draw.text((20, 95), "et sa seconde ligne", fill=0, font=font)
    draw.text((20, 300), "Second article", fill=0, font=font)
    render = PageRender(page_no=1, image=two_paragraphs, dpi=300, rotation=0, width=1400,
                        height=400, scale=1.0)
    page = ocr_pages([render], OcrSettings(workers=1))[0]
    assert page.raw_text == "Premier alinéa du registre\net sa seconde ligne\n\nSecond article"


def test_denoise_gives_the_pixels_of_pil_median_filter():
    from PIL import ImageFilter
    import numpy as np

    grainy = render_scan(source_text(fx.ROTATED), dpi=150, noise=40, seed=3)
    grainy = grainy.crop((0, 0, 601, 333))  # odd sizes: the bands do not divide the height
    expected = np.asarray(grainy.filter(ImageFilter.MedianFilter(3)))
    assert np.array_equal(denoise(np.asarray(grainy)), expected)


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


def test_a_page_whose_ocr_runs_past_its_budget_is_kept_empty_with_the_reason():
    # tesseract's own deadline, for real: a full page cannot be recognised in 50 ms
    render = next(image_pages(fx.straight_scan("PNG")))
    page = ocr_pages([render], OcrSettings(workers=1, page_timeout_s=0.05))[0]
    assert page.raw_text == "" and page.empty_reason == "OCR stopped after 0.05 s"


def test_tesseract_reads_a_page_on_one_thread():
    import os
    import threading

    def threads() -> int:
        # native threads only: a Python thread another test left starting or stopping (an events
        # worker, a pool) is not tesseract's, and made this count flaky in a full run
        return len(os.listdir("/proc/self/task")) - threading.active_count()

    render = next(image_pages(fx.straight_scan("PNG")))
    ocr_pages([_line_image("Cote")], OcrSettings(workers=1))  # engine made before counting
    before, peak = threads(), 0
    reading = threading.Thread(target=ocr.ocr_page, args=(render, OcrSettings(workers=1)))
    reading.start()
    while reading.is_alive():
        peak = max(peak, threads())
    # + 1: a Python thread is a native one a moment before threading lists it, and after
    assert peak <= before + 1  # nothing native inside tesseract


def test_more_than_one_tesseract_thread_is_refused_with_what_to_do_instead():
    with pytest.raises(ValueError, match="MABILLON_OCR__WORKERS"):
        OcrSettings(tesseract_threads=2)


def test_engines_are_made_once_per_worker_and_reused_across_documents(monkeypatch):
    monkeypatch.setattr(ocr, "ENGINES", ocr.EnginePool())
    renders = [PageRender(**{**_line_image(t).__dict__, "page_no": i + 1})
               for i, t in enumerate(["Cote un", "Cote deux", "Cote trois"])]
    ocr_pages(iter(renders), OcrSettings(workers=1))
    ocr_pages(iter(renders), OcrSettings(workers=1))
    assert ocr.ENGINES.idle() == 1
    ocr_pages(iter(renders * 2), OcrSettings(workers=2))
    assert ocr.ENGINES.idle() <= 2


def test_missing_language_data_is_a_setup_error_that_names_the_package(tmp_path):
    with pytest.raises(OcrUnavailable, match="tesseract-ocr-fra"):
        ocr_pages([_line_image("Cote")], OcrSettings(workers=1, tessdata=str(tmp_path)))


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
    """Every orientation detection, still run for real: the turns it returned."""
    calls: list[int] = []
    real = ocr.detect_turn

    def counted(*args, **kwargs):
        calls.append(real(*args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(ocr, "detect_turn", counted)
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
    render = _line_image("Cote 12")
    sideways = render.image.rotate(90, expand=True)
    render = PageRender(page_no=1, image=sideways, dpi=300, rotation=0,
                        width=sideways.width, height=sideways.height, scale=1.0)
    page = ocr_pages([render], OcrSettings(workers=1))[0]
    assert osd_calls == [0]  # OSD ran, and could not tell
    assert page.rotation == 0 and page.raw_text and page.empty_reason is None
    assert (page.width, page.height) == (sideways.width, sideways.height)


def _upside_down_line() -> PageRender:
    upside_down = _line_image("Registre des naissances").image.rotate(180)
    return PageRender(page_no=1, image=upside_down, dpi=300, rotation=0, width=1400, height=120,
                      scale=1.0)


def test_the_second_reading_of_a_turned_page_gets_what_is_left_of_the_page_budget(monkeypatch):
    budgets: list[float] = []
    real = ocr.read_image

    def recorded(pixels, dpi, scale, settings, timeout_s):
        budgets.append(timeout_s)
        return real(pixels, dpi, scale, settings, timeout_s)

    monkeypatch.setattr(ocr, "read_image", recorded)
    monkeypatch.setattr(ocr, "detect_turn", lambda *args, **kwargs: 180)
    page = ocr_pages([_upside_down_line()], OcrSettings(workers=1, page_timeout_s=30))[0]
    assert len(budgets) == 2 and budgets[0] == 30 and 0 < budgets[1] < 30
    assert page.rotation == 180 and page.raw_text == "Registre des naissances"


def test_a_page_whose_budget_is_spent_by_the_first_reading_skips_orientation_detection(
        monkeypatch, osd_calls):
    real, now = ocr.read_image, [0.0]

    def slow(*args, **kwargs):
        result = real(*args, **kwargs)
        now[0] += 1.0  # the first reading leaves half a second of the 1.5 s budget: too little
        return result

    monkeypatch.setattr(ocr, "clock", lambda: now[0])
    monkeypatch.setattr(ocr, "read_image", slow)
    page = ocr_pages([_upside_down_line()], OcrSettings(workers=1, page_timeout_s=1.5))[0]
    assert osd_calls == [] and page.rotation == 0 and page.raw_text  # the first reading stands


def test_a_wrong_turn_from_orientation_detection_is_rejected_by_the_confidence_check(monkeypatch):
    monkeypatch.setattr(ocr, "detect_turn", lambda *args, **kwargs: 180)
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
