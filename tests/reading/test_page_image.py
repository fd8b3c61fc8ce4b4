"""Page renders: a PDF region is drawn alone, at the size asked, and matches the same region of
the whole page drawn at once (every page turn); the render cache holds to its byte budget; an
image file over the render budget is refused before it is decoded."""
from __future__ import annotations

import io

import numpy as np
import pymupdf
import pytest
from PIL import Image

from tasks.reading.catalog import PageInfo
from tasks.reading.image_request import Box, ImageRequest, ImageRequestError
from tasks.reading.page_image import (Canvas, PageRenderer, _turn, _unturn, render_image_file,
                                      render_pdf_region)


def page_info(rotation: float | None = None, page_no: int = 1) -> PageInfo:
    return PageInfo(page_no=page_no, parser="pymupdf", parser_version="1", width=300.0, height=200.0,
                    dpi=None, rotation=rotation, ocr_confidence=None, raw_text="", offset=0,
                    empty_reason=None)


def drawn_pdf(pdf_rotate: int = 0) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page(width=300, height=200)
    for i in range(0, 300, 12):
        page.draw_line((i, 0), (i + 40, 200), color=(i / 300, 0.2, 1 - i / 300), width=4)
    page.draw_rect(pymupdf.Rect(200, 120, 260, 180), color=(0, 0.6, 0), fill=(0, 0.6, 0))
    page.insert_text((20, 60), "Greniers", fontsize=36)
    page.set_rotation(pdf_rotate)
    return doc.tobytes()


@pytest.mark.parametrize("turn", [0, 90, 180, 270])
def test_unturn_finds_the_pixels_a_turned_box_came_from(turn):
    rng = np.random.default_rng(turn)
    before = Image.fromarray(rng.integers(0, 255, (40, 60), dtype=np.uint8))  # 60 × 40
    turned = _turn(before, turn)
    box = (5, 7, 23, 31) if turned.width > 23 and turned.height > 31 else (5, 7, 23, 19)
    x0, y0, x1, y1 = (int(v) for v in _unturn(box, turn, before.width, before.height))
    assert np.array_equal(np.asarray(turned.crop(box)), np.asarray(_turn(before.crop((x0, y0, x1, y1)), turn)))


@pytest.mark.parametrize("ocr_turn, pdf_rotate", [(0, 0), (90, 0), (180, 90), (270, 0), (90, 90)])
def test_a_region_drawn_alone_matches_that_region_of_the_whole_page(ocr_turn, pdf_rotate):
    data = drawn_pdf(pdf_rotate)
    page = page_info(rotation=(ocr_turn + pdf_rotate) % 360)
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        rect = doc[0].rect
    dpi = 144
    pw, ph = round(rect.width * dpi / 72), round(rect.height * dpi / 72)
    cw, ch = (ph, pw) if ocr_turn in (90, 270) else (pw, ph)
    canvas = Canvas(cw, ch, 1.0, 1.0)
    whole = render_pdf_region(data, page, canvas, ImageRequest(Box(0, 0, cw, ch), cw, ch, "png"))
    assert whole.size == (cw, ch)
    region = Box(cw // 16 * 4, ch // 12 * 4, cw // 8 * 4, ch // 8 * 4)  # multiples of 4
    alone = render_pdf_region(data, page, canvas, ImageRequest(region, region.w, region.h, "png"))
    cut = whole.crop((region.x, region.y, region.x + region.w, region.y + region.h))
    assert alone.size == cut.size
    diff = np.abs(np.asarray(alone, dtype=int) - np.asarray(cut, dtype=int))
    assert diff.mean() < 3, diff.mean()  # the same pixels, up to antialiasing at the clip's edge
    # at a quarter of the size: the region of the whole page drawn at a quarter of its size
    small = render_pdf_region(data, page, canvas, ImageRequest(region, region.w // 4, region.h // 4, "png"))
    quarter = render_pdf_region(data, page, canvas, ImageRequest(Box(0, 0, cw, ch), cw // 4, ch // 4, "png"))
    x, y = region.x // 4, region.y // 4
    cut = quarter.crop((x, y, x + small.width, y + small.height))
    assert np.abs(np.asarray(small, dtype=int) - np.asarray(cut, dtype=int)).mean() < 4


def test_an_image_over_the_render_budget_is_refused_before_decoding():
    buffer = io.BytesIO()
    Image.new("L", (400, 300), 255).save(buffer, format="PNG")
    with pytest.raises(ImageRequestError) as refused:
        render_image_file(buffer.getvalue(), page_info(), max_pixels=100_000)
    assert refused.value.status == 413 and "max_render_pixels" in str(refused.value)
    assert render_image_file(buffer.getvalue(), page_info(), max_pixels=120_000).size == (400, 300)


def test_the_render_cache_holds_to_its_byte_budget(tmp_path):
    renderer = PageRenderer(layout=None, pdf_dpi=150, cache_bytes=1000)
    for n in range(20):
        renderer._keep(("r", n, "k"), b"x" * 300, 300)
        assert renderer.held_bytes <= 1000
    assert renderer.held_bytes == 900 and renderer._get(("r", 19, "k")) is not None
    renderer._keep(("r", 99, "big"), b"x" * 5000, 5000)  # larger than the budget: used, not kept
    assert renderer._get(("r", 99, "big")) is None and renderer.held_bytes == 900
    renderer.forget(set())
    assert renderer.held_bytes == 0
