"""ALTO XML is read directly: String CONTENT, HPOS/VPOS/WIDTH/HEIGHT and WC, no re-OCR."""
from __future__ import annotations

import pytest

from flows.make_sample import SAMPLE_DIR, alto_xml, source_text
from schemas.settings import MabillonSettings
from tasks.ingest.parse.alto import parse_alto
from tasks.ingest.parse.cer import character_error_rate
from tasks.ingest.parse.errors import ParseRefused
from tests.fixtures import make_samples as fx


def parse(data: bytes):
    return parse_alto(data, fx.revision_for("journal.xml", data), MabillonSettings())


def test_committed_sample_is_what_the_generator_makes():
    committed = (SAMPLE_DIR / "courrier-canton-1902.xml").read_text(encoding="utf-8")
    assert committed == alto_xml(source_text("courrier-canton-1902"))


def test_alto_words_lines_boxes_and_confidences_are_kept():
    page = parse(fx.alto()).pages[0]
    assert page.parser == "alto" and (page.width, page.height) == (2480, 3508)
    words = [e for e in page.elements if e.kind == "word"]
    first = words[0]
    assert page.raw_text[first.char_start:first.char_end] == "Le"
    assert first.bbox == (200, 200, 244, 248) and first.confidence == pytest.approx(0.80)
    confidences = [w.confidence for w in words]
    assert len(set(confidences)) > 1
    assert min(confidences) <= page.ocr_confidence <= max(confidences)


def test_hyphenated_line_ends_stay_in_raw_text_and_are_joined_in_normalised_text():
    page = parse(fx.alto()).pages[0]
    assert "clé-\nment" in page.raw_text
    assert "clément" in page.normalized_text and "clé-" not in page.normalized_text
    assert character_error_rate(source_text("courrier-canton-1902"), page.normalized_text) < 0.01


def test_older_alto_namespaces_are_read_alike():
    v2 = fx.alto().replace(b"http://www.loc.gov/standards/alto/ns-v4#", b"http://www.loc.gov/standards/alto/ns-v2#")
    v2_page, v4_page = parse(v2).pages[0], parse(fx.alto()).pages[0]
    assert v2_page.raw_text and v2_page.raw_text == v4_page.raw_text
    assert v2_page.elements == v4_page.elements


def test_non_numeric_sizes_and_confidences_are_dropped_not_fatal():
    data = (b"<alto xmlns='http://www.loc.gov/standards/alto/ns-v4#'><Layout><Page WIDTH='abc' HEIGHT='10'>"
            b"<PrintSpace><TextBlock><TextLine><String CONTENT='Mairie' HPOS='x' VPOS='1' WIDTH='5' "
            b"HEIGHT='2' WC='?'/></TextLine></TextBlock></PrintSpace></Page></Layout></alto>")
    page = parse(data).pages[0]
    assert page.raw_text == "Mairie" and (page.width, page.height) == (None, 10.0)
    word = next(e for e in page.elements if e.kind == "word")
    assert word.bbox is None and word.confidence is None


@pytest.mark.parametrize("data, reason", [
    (b"<alto><Description/></alto>", "no Page"),
    (b"<mets/>", "not ALTO"),
    (b"<alto><Layout><Page>", "malformed ALTO"),
    (fx.alto_with_entities(), "entity"),
])
def test_unusable_alto_is_refused(data, reason):
    with pytest.raises(ParseRefused, match=reason):
        parse(data)
