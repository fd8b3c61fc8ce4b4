"""ALTO XML is read directly: String CONTENT, HPOS/VPOS/WIDTH/HEIGHT and WC, no re-OCR."""
from __future__ import annotations

import gc
import gzip
from pathlib import Path

import pytest

from flows.make_sample import SAMPLE_DIR, alto_xml, source_text
from schemas.settings import MabillonSettings
from tasks.ingest.package.alto_stream import read_alto_page
from tasks.ingest.parse.alto import parse_alto
from tasks.ingest.parse.cer import character_error_rate
from tasks.ingest.parse.errors import ParseRefused
from tests.fixtures import make_samples as fx
from tests.fixtures import newspaper_package as news
from tests.ingest import alto_reference


def parse(data: bytes):
    return parse_alto(data, fx.revision_for("journal.xml", data), MabillonSettings())


def read_page(data: bytes):
    """The package reader under the configured limit, as a package is read."""
    return read_alto_page(data, max_bytes=MabillonSettings().limits.max_bytes)


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


# The streaming parser against the tree parser it replaced (tests/ingest/alto_reference.py):
# the same ParsedDocument, element for element, on every ALTO we have, and the same refusals.
NEWSPAPERS = Path(__file__).resolve().parents[2].parent / "shared" / "newspapers"


def _shared_alto() -> list[Path]:
    return sorted(NEWSPAPERS.glob("europeana-bnf/*/*/ALTO/*.xml")) + sorted(NEWSPAPERS.glob("gallica/*/*/ocr/X*.xml*"))


def _inflated(data: bytes) -> bytes:
    return gzip.decompress(data) if data.startswith(b"\x1f\x8b") else data


def _namespaced(version: str) -> bytes:
    return fx.alto().replace(b"http://www.loc.gov/standards/alto/ns-v4#",
                             f"http://www.loc.gov/standards/alto/ns-{version}#".encode())


FIXTURES = {
    "v4": fx.alto, "v3": lambda: _namespaced("v3"), "v2": lambda: _namespaced("v2"),
    "no namespace": lambda: fx.alto().replace(b' xmlns="http://www.loc.gov/standards/alto/ns-v4#"', b""),
    # the package fixture's pages: ALTO v4 in mm10, delivered gzipped
    "v4 mm10 gzipped p1": lambda: news.alto_v4(1, False), "v4 mm10 gzipped p2": lambda: news.alto_v4(2, True),
    "two pages, a DOCTYPE": lambda: (
        b'<!DOCTYPE alto [<!ELEMENT alto ANY>]><alto xmlns:x="urn:x"><Layout>'
        b'<Page WIDTH="100" HEIGHT="50"><PrintSpace><ComposedBlock><TextBlock><TextLine HPOS="-5" VPOS="1" '
        b'WIDTH="200" HEIGHT="9"><SP/><HYP/><String CONTENT="Mai" HPOS="1" VPOS="1" WIDTH="" WC="0.5"/>'
        b'<HYP CONTENT="="/><String CONTENT="" HPOS="1"/><String CONTENT="rie" HPOS="nan" VPOS="1" WIDTH="2" '
        b'HEIGHT="2"/><x:String CONTENT="x"/><Foo><String CONTENT="deeper"/></Foo></TextLine><TextLine/>'
        b'<TextLine><String CONTENT="Orne" HPOS="90" VPOS="49" WIDTH="30" HEIGHT="3" WC="1e0"/></TextLine>'
        b'</TextBlock></ComposedBlock><TextLine><String CONTENT="outside a block"/></TextLine>'
        b'<TextBlock><TextLine><String CONTENT="2" WC=""/></TextLine></TextBlock></PrintSpace></Page>'
        b'<Page><TextBlock/></Page></Layout><TextBlock><TextLine><String CONTENT="outside a page"/></TextLine>'
        b'</TextBlock></alto>'),
}
REFUSED = [b"", b"<alto", b"<mets/>", b"<mets><Page/></mets>", b"<alto/><x/>", b"<alto><Description/></alto>",
           b"<a:alto xmlns:b='x'/>", b"<alto><Page><TextBlock><TextLine><String CONTENT='&x;'/></TextLine>"
           b"</TextBlock></Page></alto>",
           b'<!DOCTYPE alto SYSTEM "alto.dtd"><alto><Page><TextBlock><TextLine>&x;</TextLine></TextBlock></Page></alto>',
           b'<!DOCTYPE alto [<!ENTITY x SYSTEM "file:///etc/passwd">]><alto><Page/></alto>',
           b'<!DOCTYPE alto [<!ENTITY x SYSTEM "x.gif" NDATA gif>]><alto><Page/></alto>',
           fx.alto_with_entities()]


def _both(data: bytes) -> tuple[str, str]:
    """Each parser's ParsedDocument as JSON, or its refusal."""
    out = []
    for parser in (alto_reference.parse_alto, parse_alto):
        try:
            out.append(parser(data, fx.revision_for("p.xml", data), MabillonSettings()).model_dump_json())
        except ParseRefused as exc:
            out.append(f"refused: {exc}")
    return out[0], out[1]


@pytest.mark.parametrize("path", _shared_alto(), ids=lambda p: p.name)
def test_the_streaming_parser_reads_the_shared_newspapers_as_the_tree_parser_did(path: Path):
    data = _inflated(path.read_bytes())
    reference, streamed = _both(data)
    assert reference == streamed and '"kind":"word"' in streamed
    assert alto_reference.parse_alto(data, fx.revision_for("p.xml", data), MabillonSettings()) == \
        parse_alto(data, fx.revision_for("p.xml", data), MabillonSettings())


@pytest.mark.parametrize("name", FIXTURES)
def test_the_streaming_parser_reads_every_alto_version_as_the_tree_parser_did(name: str):
    data = _inflated(FIXTURES[name]())
    reference, streamed = _both(data)
    assert reference == streamed and not streamed.startswith("refused")


def test_the_odd_fixture_exercises_what_it_is_there_for():
    doc = parse(FIXTURES["two pages, a DOCTYPE"]())
    # a HYP before any word and Strings deeper than the line are not read; any namespace's String is
    assert [p.raw_text for p in doc.pages] == ["Mai= rie x\nOrne\n\n2", ""]
    words = [e for e in doc.pages[0].elements if e.kind == "word"]
    assert [w.bbox for w in words] == [None, None, None, (90.0, 49.0, 100.0, 50.0), None]
    assert doc.pages[0].elements[0].bbox == (0.0, 1.0, 100.0, 10.0)  # the line's box clipped to the page


@pytest.mark.parametrize("data", REFUSED, ids=lambda d: d[:40].decode())
def test_the_streaming_parser_refuses_what_the_tree_parser_refused_with_the_same_reason(data: bytes):
    reference, streamed = _both(data)
    assert reference.startswith("refused: ") and reference == streamed


@pytest.mark.parametrize("path", _shared_alto()[:1] + _shared_alto()[-1:], ids=lambda p: p.name)
def test_the_package_reader_reads_the_words_the_tree_parser_reads(path: Path):
    """The issue-package path (alto_stream, pixels and blocks) and the file parser agree on every
    word of a pixel-unit page, gzipped or not."""
    data = _inflated(path.read_bytes())
    page = alto_reference.parse_alto(data, fx.revision_for("p.xml", data), MabillonSettings()).pages[0]
    expected = [(page.raw_text[e.char_start:e.char_end], e.bbox, e.confidence)
                for e in page.elements if e.kind == "word"]
    for delivered in (data, gzip.compress(data)):
        blocks = read_page(delivered).blocks.values()
        assert [(w.content, w.bbox, w.wc) for b in blocks for line in b.lines for w in line.words] == expected


def collections_during(work) -> list[int]:
    """The generations the cyclic collector collected while `work` ran."""
    seen: list[int] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])
    gc.collect()
    gc.callbacks.append(note)
    try:
        work()
    finally:
        gc.callbacks.remove(note)
    return seen


@pytest.mark.parametrize("reader", [parse, read_page], ids=["lone", "package"])
def test_a_read_page_is_handed_to_the_old_generation_not_scanned_as_new(reader):
    """A page's thousands of objects are output, not garbage: a young collection over them after
    the parse was half its time in a process with a model loaded (docs/benchmarks.md)."""
    data = alto_xml("\n\n".join(source_text(name) for name in ("courrier-canton-1902", "affiche-1848",
                                                                  "note-service-1952"))).encode()
    assert len(read_page(data).blocks) > 10  # thousands of objects: a young collection would be due
    assert gc.isenabled()
    assert collections_during(lambda: reader(data)) == []
    assert gc.isenabled()


OUR_PACKAGES = {"tasks", "schemas"}  # where the types of a read page are defined


@pytest.mark.parametrize("reader", [parse, read_page], ids=["lone", "package"])
def test_a_read_page_is_freed_by_reference_counting_not_left_in_a_cycle(reader):
    """Handed to the old generation, a page in a reference cycle would wait for a full
    collection (rare while pages are read) after its document is dropped: memory would grow."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collection finds is kept in gc.garbage, to be read
    try:
        result = reader(fx.alto())
        assert result is not None
        del result
        gc.collect()
        # Only the page's own objects count: a thread another test left in this process (anyio,
        # Prefect) may drop cyclic garbage of its own meanwhile (39 objects in one run).
        ours = [type(o).__qualname__ for o in gc.garbage if type(o).__module__.split(".")[0] in OUR_PACKAGES]
        assert ours == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def test_objects_someone_else_froze_stay_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        parse(fx.alto())
        # Frozen objects that die leave the count: a thread another test left in this process
        # may free some meanwhile (108 of 1,251,534 in one run). Undone by the parse, the count
        # would be 0; frozen again, it would hold the parse's objects too.
        after = gc.get_freeze_count()
        assert frozen * 0.99 <= after <= frozen and gc.isenabled(), (frozen, after)
    finally:
        gc.unfreeze()
