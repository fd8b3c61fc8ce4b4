"""The parse stage's planning: long scans split by page, pieces packed into units of work, and
documents without text refused with what their pages say."""
from __future__ import annotations

from schemas.lineage import ParsedDocument, ParsedPage
from tasks.ingest.parse import textless_reason
from tasks.ingest.parse.units import ParsePiece, pack, pieces_of
from tests.fixtures import make_samples as fx


def rev(name: str, media_type: str):
    return fx.revision_for(name, name.encode(), media_type)


PDF, TXT = "application/pdf", "text/plain"


def test_a_long_scan_is_split_by_page_and_other_revisions_stay_whole():
    assert pieces_of(rev("a.pdf", PDF), 3) == [ParsePiece(rev("a.pdf", PDF), (n,)) for n in (1, 2, 3)]
    assert pieces_of(rev("b.pdf", PDF), 1) == [ParsePiece(rev("b.pdf", PDF))]
    assert pieces_of(rev("c.txt", TXT), 5) == [ParsePiece(rev("c.txt", TXT))]


def test_units_hold_about_pages_per_task_and_pages_of_one_scan_become_one_piece():
    pieces = pieces_of(rev("a.pdf", PDF), 8)
    units = pack(pieces, pages_per_task=4, workers=1)
    assert [[p.pages for p in unit] for unit in units] == [[(1, 2, 3, 4)], [(5, 6, 7, 8)]]


def test_units_shrink_so_that_every_worker_gets_work():
    units = pack(pieces_of(rev("a.pdf", PDF), 8), pages_per_task=4, workers=2)
    assert len(units) == 4 and all(sum(p.cost for p in u) == 2 for u in units)


def test_cheap_revisions_share_a_unit_and_every_piece_is_packed_once():
    texts = [ParsePiece(rev(f"{i}.txt", TXT)) for i in range(100)]
    units = pack(texts + pieces_of(rev("a.pdf", PDF), 2), pages_per_task=4, workers=2)
    packed = [p for u in units for p in u]
    assert len(units) < 20
    assert sorted(p.revision.source_id for p in packed if p.pages is None) == sorted(f"{i}.txt" for i in range(100))
    assert [n for p in packed if p.pages for n in p.pages] == [1, 2]


def page(n: int, text: str, reason: str | None = None) -> ParsedPage:
    return ParsedPage(page_no=n, raw_text=text, normalized_text=text, parser="t", parser_version="1",
                      empty_reason=reason)


def test_a_document_without_text_on_any_page_is_refused_with_its_pages_reasons():
    blank = ParsedDocument(revision_id="r", pages=[page(1, "", "OCR found no words on the page"), page(2, " ")])
    assert textless_reason(blank) == ("no text found on any of its 2 page(s): OCR found no words on the page; "
                                      "no text on the page")
    assert textless_reason(ParsedDocument(revision_id="r", pages=[page(1, ""), page(2, "Séance.")])) is None
