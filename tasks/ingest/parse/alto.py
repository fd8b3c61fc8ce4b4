"""ALTO XML (digitised newspapers): the OCR is already done, so it is read, never redone.

String CONTENT becomes the raw text (words by spaces, TextLines by newlines, TextBlocks by a
blank line; a HYP at a line end is kept as "-" so normalisation can join the word), with
String boxes (HPOS, VPOS, WIDTH, HEIGHT) and word confidence (WC, 0–1) on the elements. Boxes
stay in the file's MeasurementUnit (pixel, mm10 or inch1200), as the page width and height do.

Read in one streaming pass on expat's callbacks: no element tree is built (a newspaper page is
≈ 100,000 XML elements; building and walking the tree cost half the time). Defused as
defusedxml's defaults are: an entity declaration or an external entity reference refuses the
file, a DOCTYPE without them is read. The output is the tree parser's, element for element
(tests/ingest/alto_reference.py is that parser; tests/ingest/test_alto.py compares them).
A gzipped file (known by its magic bytes) is inflated as it is read, within the size limit of
the settings, and gives the document its uncompressed form gives.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from xml.parsers import expat

from defusedxml.common import DefusedXmlException, EntitiesForbidden, ExternalReferenceForbidden

from schemas.lineage import BBox, Element, ParsedDocument, ParsedPage, Revision
from schemas.settings import ParseSettings
from tasks.ingest.gunzip import InflateRefused, inflated_chunks, is_gzip
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.normalize import normalize_text

PARSER_VERSION = "alto-1"  # unchanged by the streaming rewrite: its output is the same
_NS = "}"  # expat's namespace separator, as ElementTree's: "uri}Local"


def number(value: str | None) -> float | None:
    """An attribute as a number, or None where it is absent or not numeric."""
    try:
        return float(value) if value else None
    except ValueError:
        return None


def on_page(attrs: dict[str, str], width: float | None,
            height: float | None) -> tuple[float, float, float, float] | None:
    """HPOS/VPOS/WIDTH/HEIGHT as a box clipped to the page; None when absent, not numeric, or
    nothing of it is on the page (or it is inverted).

    OCR exports carry negative offsets and coordinates past the page edge; a box off the page
    would send a reader's highlight nowhere, so the word keeps its text and loses its box.
    """
    try:  # the common case, four numbers: one float() each
        x, y, w, h = float(attrs["HPOS"]), float(attrs["VPOS"]), float(attrs["WIDTH"]), float(attrs["HEIGHT"])
    except (KeyError, ValueError):  # absent (a size defaults to 0), empty or not numeric
        x, y = number(attrs.get("HPOS")), number(attrs.get("VPOS"))
        w, h = number(attrs.get("WIDTH", "0")), number(attrs.get("HEIGHT", "0"))
        if x is None or y is None or w is None or h is None:
            return None
    # max() and min() spelt out (a call each, four a word, was a tenth of this function's time),
    # as they decide: the first argument unless the second is strictly beyond it (-0.0, NaN)
    x0, y0, x1, y1 = 0.0 if 0.0 > x else x, 0.0 if 0.0 > y else y, x + w, y + h
    if width and width < x1:
        x1 = width
    if height and height < y1:
        y1 = height
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


_FIELDS = frozenset(Element.model_fields)
_new, _set = object.__new__, object.__setattr__


def _element(kind: str, start: int, end: int, bbox: BBox | None, confidence: float | None) -> Element:
    """An Element from values this module made and typed itself, without pydantic's validation:
    what `Element.model_construct` does, without its loop over the fields (a newspaper page has
    ≈ 5,000 elements: validating them was a quarter of the parse). The comparison with the tree
    parser, which validates, proves them equal (tests/ingest/test_alto.py)."""
    element = _new(Element)
    _set(element, "__dict__", {"kind": kind, "char_start": start, "char_end": end, "bbox": bbox,
                               "confidence": confidence})
    _set(element, "__pydantic_fields_set__", set(_FIELDS))
    _set(element, "__pydantic_extra__", None)
    _set(element, "__pydantic_private__", None)
    return element


def _read(parser: expat.XMLParserType) -> tuple[list[str], list[ParsedPage]]:
    """Sets expat's callbacks on `parser`; returns (the root's local name, once read) and the pages
    as they end. A TextLine's own String and HYP children (not deeper ones) are its words, as the
    tree parser read them; TextBlocks count only inside a Page, TextLines only inside a TextBlock.
    The depth counter tells a direct child from a deeper one. Closures, not methods: a page is
    ≈ 100,000 elements, two callbacks each, and a closure's variables are the cheapest to reach."""
    root: list[str] = []
    pages: list[ParsedPage] = []
    names: dict[str, str] = {}  # tag → local name: ALTO v2, v3 and v4 differ only by namespace
    depth = 0
    page_depth = block_depth = line_depth = child_depth = -1
    # the open page
    width = height = None
    parts: list[str] = []
    elements: list[Element] = []
    length, weighted, chars = 0, 0.0, 0.0
    # the open block and line
    lines_started = False  # a line of the open block has words
    line_start: int | None = None  # offset of the open line's first word
    line_attrs: dict[str, str] = {}
    words: list[Element] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal depth, page_depth, block_depth, line_depth, child_depth, width, height, parts, elements, \
            length, weighted, chars, lines_started, line_start, line_attrs, words
        depth += 1
        name = names.get(tag)
        if name is None:
            name = names[tag] = tag.rpartition(_NS)[2]
        if depth == child_depth:  # a direct child of the open TextLine
            if name == "String":
                content = attrs.get("CONTENT")
                if not content:
                    return
                if line_start is None:
                    sep = "\n" if lines_started else ("\n\n" if length else "")
                    parts.append(sep)
                    length += len(sep)
                    line_start = length
                else:
                    parts.append(" ")
                    length += 1
                wc = number(attrs.get("WC"))
                end = length + len(content)
                words.append(_element("word", length, end, on_page(attrs, width, height), wc))
                parts.append(content)
                length = end
                if wc is not None:
                    weighted += wc * len(content)
                    chars += len(content)
            elif name == "HYP" and line_start is not None:
                hyphen = attrs.get("CONTENT") or "-"
                parts.append(hyphen)
                length += len(hyphen)
        elif name == "TextLine":
            if block_depth >= 0 and line_depth < 0:
                line_depth, child_depth, line_attrs, line_start, words = depth, depth + 1, attrs, None, []
        elif name == "TextBlock":
            if page_depth >= 0 and block_depth < 0:
                block_depth, lines_started = depth, False
        elif name == "Page":
            if page_depth < 0:
                page_depth = depth
                width, height = number(attrs.get("WIDTH")), number(attrs.get("HEIGHT"))
                parts, elements, length, weighted, chars = [], [], 0, 0.0, 0.0
        elif depth == 1:
            root.append(name)  # checked once the file is read: a malformed file says so first

    def end(_tag: str) -> None:
        nonlocal depth, page_depth, block_depth, line_depth, child_depth, lines_started
        depth -= 1
        if depth == line_depth - 1:
            line_depth = child_depth = -1
            if line_start is None:
                return
            lines_started = True
            confidences = [w.confidence for w in words if w.confidence is not None]
            elements.append(_element("line", line_start, length, on_page(line_attrs, width, height),
                                     sum(confidences) / len(confidences) if confidences else None))
            elements.extend(words)
        elif depth == block_depth - 1:
            block_depth = -1
        elif depth == page_depth - 1:
            page_depth = -1
            text = "".join(parts)
            # Pages are numbered in file order: PHYSICAL_IMG_NR is not always present or unique.
            pages.append(ParsedPage(
                page_no=len(pages) + 1, raw_text=text, normalized_text=normalize_text(text), parser="alto",
                parser_version=PARSER_VERSION, ocr_confidence=weighted / chars if chars else None,
                width=width, height=height,
                elements=elements, empty_reason=None if text else "ALTO page has no String"))

    parser.StartElementHandler, parser.EndElementHandler = start, end
    return root, pages


def _entity_declared(name, is_parameter_entity, value, base, sysid, pubid, notation_name):
    raise EntitiesForbidden(name, value, base, sysid, pubid, notation_name)


def _unparsed_entity_declared(name, base, sysid, pubid, notation_name):
    raise EntitiesForbidden(name, None, base, sysid, pubid, notation_name)


def _external_reference(context, base, sysid, pubid):
    raise ExternalReferenceForbidden(context, base, sysid, pubid)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a page's objects are made: a page allocates
    ≈ 20,000 tracked objects, none of them garbage, and the collections they trigger scan the
    whole heap (a worker's heap holds a model's): measured, 45 % of the parse's time. Left as
    found when it was already off.

    Re-enabling alone is not enough: the page's objects are still counted as new, and the first
    allocation after runs a young-generation collection over all of them (measured in the
    bench's process, a model loaded: one collection a page, about half the parse's time). They are
    the parse's output, not garbage, so they are handed to the oldest generation unscanned:
    `freeze` then `unfreeze` moves every tracked object there (two list splices, no scan) and
    zeroes the young count. What is garbage among them is freed by reference counting as ever,
    or by the next full collection. Skipped when something else froze objects (a pre-fork
    server): `unfreeze` would undo it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def parse_alto(data: bytes, revision: Revision, settings: ParseSettings) -> ParsedDocument:
    parser = expat.ParserCreate(None, _NS)
    root, pages = _read(parser)

    def undefined_entity(name: str, _is_parameter_entity: bool) -> None:
        # a reference to an entity of an external DTD that is never read: ElementTree refused it
        raise ParseRefused(f"malformed ALTO XML: undefined entity &{name};: "
                           f"line {parser.CurrentLineNumber}, column {parser.CurrentColumnNumber}")

    parser.SkippedEntityHandler = undefined_entity
    parser.EntityDeclHandler = _entity_declared
    parser.UnparsedEntityDeclHandler = _unparsed_entity_declared
    parser.ExternalEntityRefHandler = _external_reference
    try:
        with gc_paused():
            if is_gzip(data):
                for chunk in inflated_chunks(data, settings.limits.max_bytes):
                    parser.Parse(chunk, False)
                parser.Parse(b"", True)
            else:
                parser.Parse(data, True)
    except InflateRefused as exc:
        raise ParseRefused(str(exc)) from None
    except DefusedXmlException as exc:
        raise ParseRefused(f"XML with entity or DTD declarations refused: {exc}") from None
    except expat.ExpatError as exc:
        raise ParseRefused(f"malformed ALTO XML: {exc}") from None
    finally:
        # The handler refers to the parser, which holds it: a reference cycle, and through the
        # parser `_read`'s closures hold the whole page. Broken here, the page is freed as soon
        # as its document is dropped, not at a full collection (rare once gc_paused hands the
        # page to the old generation).
        parser.SkippedEntityHandler = None
    if root[0].lower() != "alto":
        raise ParseRefused(f"not ALTO: root element is <{root[0]}>")
    if not pages:
        raise ParseRefused("ALTO file has no Page")
    return ParsedDocument(revision_id=revision.revision_id, pages=pages)
