"""DoclingDocument → one page of raw text with structural elements (title, heading, list, table).

docling gives DOCX and HTML their structure; it has no page geometry for them, so the elements
carry offsets and kinds but no boxes. Inline runs (bold, links) that docling splits into
separate items are joined back into their paragraph.
"""
from __future__ import annotations

import functools
import io
from importlib.metadata import version
from typing import TYPE_CHECKING

from docling_core.types.doc import DoclingDocument, GroupItem, GroupLabel, NodeItem, TableItem, TextItem

from schemas.lineage import Element, ParsedPage
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.parse.normalize import normalize_text

if TYPE_CHECKING:
    from docling.document_converter import DocumentConverter

_KINDS = {"text": "paragraph", "paragraph": "paragraph", "section_header": "heading",
          "title": "title", "list_item": "list_item", "caption": "caption", "code": "code",
          "formula": "formula", "footnote": "footnote", "table": "table"}
_NO_SPACE_BEFORE = tuple(",.)]»'’")


@functools.cache
def docling_version() -> str:
    return f"docling-{version('docling-slim')}"


def join_inline(texts: list[str]) -> str:
    out = ""
    for text in (t.strip() for t in texts):
        if text:
            out += text if not out or text.startswith(_NO_SPACE_BEFORE) else " " + text
    return out


def table_text(item: TableItem) -> str:
    """One line per row, cells separated by " | ", so a row stays together in a chunk."""
    rows = []
    for row in item.data.grid:
        cells = [" ".join(cell.text.split()) for cell in row]
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def blocks(doc: DoclingDocument, node: NodeItem) -> list[tuple[str, str]]:
    """(kind, text) of the body in reading order; pictures carry no text and are skipped."""
    out: list[tuple[str, str]] = []
    for ref in node.children:
        child = ref.resolve(doc)
        if isinstance(child, GroupItem) and child.label == GroupLabel.INLINE:
            text = join_inline([getattr(c.resolve(doc), "text", "") for c in child.children])
            if text:
                out.append(("paragraph", text))
        elif isinstance(child, TableItem):
            text = table_text(child)
            if text:
                out.append(("table", text))
        elif isinstance(child, TextItem):
            if child.text.strip():
                out.append((_KINDS.get(child.label.value, child.label.value), child.text.strip()))
            out.extend(blocks(doc, child))  # list items can hold nested lists
        else:
            out.extend(blocks(doc, child))
    return out


def document_page(doc: DoclingDocument, parser: str) -> ParsedPage:
    parts: list[str] = []
    elements: list[Element] = []
    length = 0
    for kind, text in blocks(doc, doc.body):
        if parts:
            parts.append("\n\n")
            length += 2
        elements.append(Element(kind=kind, char_start=length, char_end=length + len(text)))
        parts.append(text)
        length += len(text)
    raw = "".join(parts)
    return ParsedPage(page_no=1, raw_text=raw, normalized_text=normalize_text(raw), parser=parser,
                      parser_version=docling_version(), elements=elements,
                      empty_reason=None if raw else "document has no text")


def convert_page(converter: DocumentConverter, data: bytes, fmt: str) -> ParsedPage:
    """Run one docling converter over `data` ("docx" or "html"); any failure is a ParseRefused
    naming the format, so the file is quarantined with a reason instead of breaking the batch."""
    from docling.datamodel.base_models import ConversionStatus, DocumentStream

    label = fmt.upper()
    try:
        result = converter.convert(DocumentStream(name=f"input.{fmt}", stream=io.BytesIO(data)),
                                   raises_on_error=False)
    except Exception as exc:  # docling wraps backend failures in several exception types
        raise ParseRefused(f"malformed {label}: {exc}") from None
    if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
        raise ParseRefused(f"malformed {label}: docling conversion {result.status.value}")
    return document_page(result.document, f"docling-{fmt}")
