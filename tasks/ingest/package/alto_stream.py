"""One ALTO page read in a single streaming pass (v1–v4, plain or gzipped, defused).

expat's callbacks turn each TextBlock into an `AltoBlock` when its end tag is read; no element
tree is built at all (a DOM of every page would cost twice the time), and a DTD or an entity
declaration refuses the file, as defusedxml's forbid_dtd does; boxes are converted from the file's
MeasurementUnit (pixel, mm10, inch1200) to pixels and clipped to the page. The page's own
confidence (Page/@PC) and BnF's "OCR BRUT nn %" processing note are kept.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from xml.parsers import expat

from schemas.package import AltoBlock, AltoLine, AltoWord, Box
from tasks.ingest.gunzip import InflateRefused, inflated_chunks, is_gzip
from tasks.ingest.parse.alto import gc_paused

# ALTO units per inch; pixels are converted at the resolution the page was scanned at.
UNITS_PER_INCH = {"mm10": 254.0, "inch1200": 1200.0}
DEFAULT_DPI = 300  # when neither the package nor the ALTO says (recorded as assumed)
OCR_BRUT = re.compile(r"OCR\s+BRUT\s+([\d.,]+)\s*%", re.IGNORECASE)


class AltoError(ValueError):
    """The page cannot be read; the message names what is wrong."""


@dataclass
class AltoPage:
    width: float | None = None  # pixels
    height: float | None = None
    unit: str = "pixel"
    scale: float = 1.0
    pc: float | None = None
    ocr_brut: float | None = None
    file_identifier: str | None = None  # sourceImageInformation/fileIdentifier (Gallica: ark/f<n>)
    blocks: dict[str, AltoBlock] = field(default_factory=dict)  # by block ID, in file order
    # ComposedBlock ID (and the Page ID) → IDs of the TextBlocks inside it: a METS area may name either
    groups: dict[str, list[str]] = field(default_factory=dict)
    n_pages: int = 0


def _num(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def _box(attrs: dict, scale: float, width: float | None, height: float | None) -> Box | None:
    """HPOS/VPOS/WIDTH/HEIGHT in pixels, clipped to the page; None when absent or off the page."""
    try:
        x, y = float(attrs["HPOS"]), float(attrs["VPOS"])
        w, h = float(attrs["WIDTH"]), float(attrs["HEIGHT"])
    except (KeyError, ValueError):
        return None
    x0, y0, x1, y1 = max(x * scale, 0.0), max(y * scale, 0.0), (x + w) * scale, (y + h) * scale
    if width and x1 > width:
        x1 = width
    if height and y1 > height:
        y1 = height
    if x1 <= x0 or y1 <= y0:
        return None
    return (x0, y0, x1, y1) if scale == 1.0 else (round(x0, 1), round(y0, 1), round(x1, 1), round(y1, 1))


class _Handler:
    """expat callbacks: TextBlocks, TextLines and Strings become blocks as they end; nothing
    else of the tree is built. DTDs and entity declarations are refused (defused)."""

    TEXT = {"MeasurementUnit", "processingStepDescription", "fileIdentifier"}

    def __init__(self, dpi: float):
        self.page, self.dpi = AltoPage(), dpi
        self.root: str | None = None
        self.groups: list[str | None] = []  # open Page / ComposedBlock ids
        self.block: tuple[str | None, dict] | None = None
        self.lines: list[AltoLine] = []
        self.words: list[AltoWord] | None = None
        self.line_attrs: dict = {}
        self.hyphen: str | None = None
        self.text: list[str] | None = None

    def start(self, tag: str, attrs: dict) -> None:
        name = tag.rpartition(":")[2]
        page = self.page
        if name == "String":
            if self.words is not None and (content := attrs.get("CONTENT")):
                wc = attrs.get("WC")
                try:
                    conf = float(wc) if wc else None
                except ValueError:
                    conf = None
                self.words.append(AltoWord(content, _box(attrs, page.scale, page.width, page.height), conf))
                self.hyphen = None
        elif name == "TextLine":
            self.words, self.line_attrs, self.hyphen = [], attrs, None
        elif name == "HYP":
            if self.words:
                self.hyphen = attrs.get("CONTENT") or "-"
        elif name == "TextBlock":
            self.block, self.lines = (attrs.get("ID"), attrs), []
        elif name == "ComposedBlock":
            self.groups.append(attrs.get("ID"))
        elif name == "Page":
            page.n_pages += 1
            if page.n_pages == 1:
                w, h = _num(attrs.get("WIDTH")), _num(attrs.get("HEIGHT"))
                page.width = round(w * page.scale, 1) if w else None
                page.height = round(h * page.scale, 1) if h else None
                page.pc = _num(attrs.get("PC"))
            self.groups.append(attrs.get("ID") or f"_page{page.n_pages}")
        elif self.root is None:
            if name.lower() != "alto":
                raise AltoError(f"not ALTO: root element is <{name}>")
            self.root = name
        elif name in self.TEXT:
            self.text = []

    def end(self, tag: str) -> None:
        name = tag.rpartition(":")[2]
        if name == "String" or name == "HYP" or name == "SP":
            return
        page = self.page
        if name == "TextLine":
            if self.words:
                self.lines.append(AltoLine.model_construct(
                    bbox=_box(self.line_attrs, page.scale, page.width, page.height), words=self.words,
                    hyphen=self.hyphen))
            self.words = None
        elif name == "TextBlock" and self.block is not None:
            block_id, attrs = self.block
            block_id = block_id or f"_block{len(page.blocks) + 1}"
            if block_id not in page.blocks:
                page.blocks[block_id] = AltoBlock.model_construct(
                    block_id=block_id, bbox=_box(attrs, page.scale, page.width, page.height), lines=self.lines)
                for group in self.groups:
                    if group:
                        page.groups.setdefault(group, []).append(block_id)
            self.block, self.lines = None, []
        elif name in ("ComposedBlock", "Page"):
            if self.groups:
                self.groups.pop()
        elif name in self.TEXT and self.text is not None:
            value = "".join(self.text).strip()
            self.text = None
            if name == "MeasurementUnit":
                unit = value.lower()
                page.unit = unit
                page.scale = self.dpi / UNITS_PER_INCH[unit] if unit in UNITS_PER_INCH else 1.0
            elif name == "processingStepDescription" and page.ocr_brut is None:
                if m := OCR_BRUT.search(value):
                    page.ocr_brut = _num(m.group(1).replace(",", "."))
            elif name == "fileIdentifier" and page.file_identifier is None and value:
                page.file_identifier = value

    def chars(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)


def _refuse_dtd(*_args) -> None:
    raise AltoError("XML with a DTD or entity declarations refused")


def read_alto_page(data: bytes, dpi: float = DEFAULT_DPI, *, max_bytes: int) -> AltoPage:
    """The page's size, confidences and TextBlocks (a multi-page ALTO's blocks are all kept).

    `max_bytes`: the configured size limit (`limits.max_bytes`, as for a lone file); a gzipped
    page that inflates beyond it is refused as a bomb."""
    handler = _Handler(dpi)
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartElementHandler, parser.EndElementHandler = handler.start, handler.end
    parser.CharacterDataHandler = handler.chars
    parser.StartDoctypeDeclHandler = parser.EntityDeclHandler = _refuse_dtd
    parser.ExternalEntityRefHandler = _refuse_dtd
    try:
        with gc_paused():  # its words and lines are thousands of objects, none of them garbage
            for chunk in inflated_chunks(data, max_bytes) if is_gzip(data) else (data,):
                parser.Parse(chunk, False)
            parser.Parse(b"", True)
    except expat.ExpatError as exc:
        raise AltoError(f"malformed ALTO XML: {expat.ErrorString(exc.code)} at line {exc.lineno}") from None
    except InflateRefused as exc:  # a damaged gzip stream, or a bomb: it says which
        raise AltoError(str(exc)) from None
    if handler.root is None:
        raise AltoError("empty ALTO file")
    if handler.page.n_pages == 0:
        raise AltoError("ALTO file has no Page")
    return handler.page
