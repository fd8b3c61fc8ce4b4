"""The ALTO parser as it was before streaming (defusedxml ElementTree, the whole tree built), kept
as the reference: the streaming `tasks/ingest/parse/alto.py` must give the same ParsedDocument
(tests/ingest/test_alto.py), and bench/bench_alto.py measures it as the baseline.

String CONTENT becomes the raw text (words by spaces, TextLines by newlines, TextBlocks by a
blank line; a HYP at a line end is kept as "-" so normalisation can join the word), with
String boxes (HPOS, VPOS, WIDTH, HEIGHT) and word confidence (WC, 0–1) on the elements.
"""
from __future__ import annotations

from xml.etree.ElementTree import Element as XmlElement

from defusedxml import ElementTree as SafeET
from defusedxml.common import DefusedXmlException

from schemas.lineage import Element, ParsedDocument, ParsedPage, Revision
from schemas.settings import ParseSettings
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.alto import PARSER_VERSION
from tasks.ingest.parse.normalize import normalize_text


def local(tag: str) -> str:
    """Tag name without its namespace: ALTO v2, v3 and v4 differ only by namespace."""
    return tag.rsplit("}", 1)[-1]


def children(node: XmlElement, name: str) -> list[XmlElement]:
    return [c for c in node.iter() if local(c.tag) == name]


def number(value: str | None) -> float | None:
    """An attribute as a number, or None where it is absent or not numeric."""
    try:
        return float(value) if value else None
    except ValueError:
        return None


def box(node: XmlElement) -> tuple[float, float, float, float] | None:
    x, y = number(node.get("HPOS")), number(node.get("VPOS"))
    width, height = number(node.get("WIDTH", "0")), number(node.get("HEIGHT", "0"))
    if x is None or y is None or width is None or height is None:
        return None
    return (x, y, x + width, y + height)


def on_page(bbox: tuple[float, float, float, float] | None, width: float | None,
            height: float | None) -> tuple[float, float, float, float] | None:
    """The box clipped to the page; None when nothing of it is on the page (or it is inverted).

    OCR exports carry negative offsets and coordinates past the page edge; a box off the page
    would send a reader's highlight nowhere, so the word keeps its text and loses its box.
    """
    if bbox is None:
        return None
    x0, y0, x1, y1 = max(bbox[0], 0.0), max(bbox[1], 0.0), bbox[2], bbox[3]
    x1, y1 = min(x1, width) if width else x1, min(y1, height) if height else y1
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def confidence(node: XmlElement) -> float | None:
    return number(node.get("WC"))


def read_page(page: XmlElement, page_no: int) -> ParsedPage:
    parts: list[str] = []
    elements: list[Element] = []
    length = 0
    weighted = chars = 0.0
    width, height = number(page.get("WIDTH")), number(page.get("HEIGHT"))

    def add(text: str) -> None:
        nonlocal length
        parts.append(text)
        length += len(text)

    for block in children(page, "TextBlock"):
        lines_started = False
        for line in children(block, "TextLine"):
            line_start = None
            words: list[Element] = []
            for node in line:
                kind = local(node.tag)
                if kind == "String":
                    content = node.get("CONTENT", "")
                    if not content:
                        continue
                    if line_start is None:
                        add("\n" if lines_started else ("\n\n" if parts else ""))
                        line_start = length
                    else:
                        add(" ")
                    wc = confidence(node)
                    words.append(Element(kind="word", char_start=length, char_end=length + len(content),
                                         bbox=on_page(box(node), width, height), confidence=wc))
                    add(content)
                    if wc is not None:
                        weighted += wc * len(content)
                        chars += len(content)
                elif kind == "HYP" and line_start is not None:
                    add(node.get("CONTENT") or "-")
            if line_start is None:
                continue
            lines_started = True
            confidences = [w.confidence for w in words if w.confidence is not None]
            elements.append(Element(kind="line", char_start=line_start, char_end=length,
                                    bbox=on_page(box(line), width, height),
                                    confidence=sum(confidences) / len(confidences) if confidences else None))
            elements.extend(words)
    text = "".join(parts)
    return ParsedPage(
        page_no=page_no, raw_text=text, normalized_text=normalize_text(text), parser="alto",
        parser_version=PARSER_VERSION, ocr_confidence=weighted / chars if chars else None,
        width=width, height=height,
        elements=elements, empty_reason=None if text else "ALTO page has no String",
    )


def parse_alto(data: bytes, revision: Revision, settings: ParseSettings) -> ParsedDocument:
    try:
        root = SafeET.fromstring(data)
    except DefusedXmlException as exc:
        raise ParseRefused(f"XML with entity or DTD declarations refused: {exc}") from None
    except SafeET.ParseError as exc:
        raise ParseRefused(f"malformed ALTO XML: {exc}") from None
    if local(root.tag).lower() != "alto":
        raise ParseRefused(f"not ALTO: root element is <{local(root.tag)}>")
    pages = children(root, "Page")
    if not pages:
        raise ParseRefused("ALTO file has no Page")
    # Pages are numbered in file order: PHYSICAL_IMG_NR is not always present or unique.
    parsed = [read_page(page, number) for number, page in enumerate(pages, start=1)]
    return ParsedDocument(revision_id=revision.revision_id, pages=parsed)
