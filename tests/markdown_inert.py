"""Markdown read as a renderer reads it (markdown-it-py, CommonMark with GFM tables), to check
that what an artifact interpolates stays text: no live link or image to a scheme other than
http(s), no raw HTML, table rows as many as written."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from markdown_it import MarkdownIt


def renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    # markdown-it drops javascript: links by itself; Prefect's renderer may not: judge the markup
    md.validateLink = lambda url: True
    return md


@dataclass
class Reading:
    links: list[str]  # href of every link and src of every image
    html: list[str]  # raw HTML that would reach the page
    tables: list[list[int]]  # per table, the cells of each body row
    text: str  # the text a reader sees (inline content, code included)


def read(markdown: str) -> Reading:
    tokens = renderer().parse(markdown)
    links, html, tables, texts = [], [], [], []
    row = None
    for tok in tokens:
        if tok.type == "html_block":
            html.append(tok.content)
        elif tok.type == "table_open":
            tables.append([])
        elif tok.type == "tr_open":
            row = 0
        elif tok.type == "td_open" and row is not None:
            row += 1
        elif tok.type == "tr_close" and row is not None:
            if row:  # header rows have th, not td
                tables[-1].append(row)
            row = None
        elif tok.type in ("fence", "code_block"):
            texts.append(tok.content)
        for child in tok.children or []:
            if child.type == "link_open":
                links.append(child.attrGet("href") or "")
            elif child.type == "image":
                links.append(child.attrGet("src") or "")
            elif child.type == "html_inline":
                html.append(child.content)
            elif child.type in ("text", "code_inline"):
                texts.append(child.content)
    return Reading(links, html, tables, "\n".join(texts))


def unsafe_links(reading: Reading) -> list[str]:
    return [u for u in reading.links if urlsplit(u).scheme.lower() not in ("", "http", "https")
            or u.strip().lower().startswith(("javascript", "data", "vbscript"))]


def assert_inert(markdown: str, rows: list[int] | None = None) -> Reading:
    """No raw HTML, no link outside http(s) and relative ones; `rows`: the body rows each table
    must have, in order."""
    reading = read(markdown)
    assert not reading.html, reading.html
    assert not unsafe_links(reading), unsafe_links(reading)
    if rows is not None:
        assert [len(t) for t in reading.tables] == rows, reading.tables
        for table in reading.tables:  # every row keeps the header's columns
            assert len(set(table)) <= 1, table
    return reading
