"""One ALTO page read in a single streaming pass (v1–v4, plain or gzipped, defused).

Each TextBlock is turned into an `AltoBlock` when its end tag is read and its XML subtree is
dropped at once, so a page is never held as a DOM; boxes are converted from the file's
MeasurementUnit (pixel, mm10, inch1200) to pixels and clipped to the page. The page's own
confidence (Page/@PC) and BnF's "OCR BRUT nn %" processing note are kept.
"""
from __future__ import annotations

import gzip
import io
import re
from dataclasses import dataclass, field

from defusedxml.common import DefusedXmlException
from defusedxml.ElementTree import iterparse

from schemas.package import AltoBlock, AltoLine, AltoWord, Box

# ALTO units per inch; pixels are converted at the resolution the page was scanned at.
UNITS_PER_INCH = {"mm10": 254.0, "inch1200": 1200.0}
DEFAULT_DPI = 300  # when neither the package nor the ALTO says (recorded as assumed)
OCR_BRUT = re.compile(r"OCR\s+BRUT\s+([\d.,]+)\s*%", re.IGNORECASE)
GZIP_MAGIC = b"\x1f\x8b"
MAX_INFLATED = 512 << 20  # a gzipped page that inflates beyond this is refused (a bomb, not a page)


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


def local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _num(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


class _Limited(io.RawIOBase):
    """A gzip stream that stops being read past MAX_INFLATED bytes."""

    def __init__(self, inner):
        self.inner, self.count = inner, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.inner.read(len(buffer))
        self.count += len(data)
        if self.count > MAX_INFLATED:
            raise AltoError(f"gzipped ALTO inflates beyond {MAX_INFLATED >> 20} MiB")
        buffer[:len(data)] = data
        return len(data)


def open_alto(data: bytes):
    if data.startswith(GZIP_MAGIC):
        return io.BufferedReader(_Limited(gzip.GzipFile(fileobj=io.BytesIO(data))))
    return io.BytesIO(data)


class _Reader:
    def __init__(self, dpi: float):
        self.page = AltoPage()
        self.dpi = dpi

    def set_unit(self, unit: str) -> None:
        unit = unit.strip().lower()
        self.page.unit = unit
        self.page.scale = self.dpi / UNITS_PER_INCH[unit] if unit in UNITS_PER_INCH else 1.0

    def box(self, node) -> Box | None:
        x, y = _num(node.get("HPOS")), _num(node.get("VPOS"))
        w, h = _num(node.get("WIDTH")), _num(node.get("HEIGHT"))
        if x is None or y is None or w is None or h is None:
            return None
        s, page = self.page.scale, self.page
        x0, y0, x1, y1 = max(x * s, 0.0), max(y * s, 0.0), (x + w) * s, (y + h) * s
        if page.width:
            x1 = min(x1, page.width)
        if page.height:
            y1 = min(y1, page.height)
        return (round(x0, 1), round(y0, 1), round(x1, 1), round(y1, 1)) if x1 > x0 and y1 > y0 else None

    def block(self, node) -> AltoBlock:
        lines = []
        for line in node.iter():
            if local(line.tag) != "TextLine":
                continue
            words, hyphen = [], None
            for child in line:
                kind = local(child.tag)
                if kind == "String" and (content := child.get("CONTENT")):
                    words.append(AltoWord.model_construct(content=content, bbox=self.box(child), wc=_num(child.get("WC"))))
                    hyphen = None
                elif kind == "HYP" and words:
                    hyphen = child.get("CONTENT") or "-"
            if words:
                lines.append(AltoLine.model_construct(bbox=self.box(line), words=words, hyphen=hyphen))
        return AltoBlock.model_construct(block_id=node.get("ID") or f"_block{len(self.page.blocks) + 1}",
                         bbox=self.box(node), lines=lines)


def read_alto_page(data: bytes, dpi: float = DEFAULT_DPI) -> AltoPage:
    """The page's size, confidences and TextBlocks (a multi-page ALTO's blocks are all kept)."""
    reader = _Reader(dpi)
    page = reader.page
    seen_root = False
    open_groups: list[str] = []
    try:
        for event, node in iterparse(open_alto(data), events=("start", "end"), forbid_dtd=True):
            name = local(node.tag)
            if event == "start":
                if not seen_root:
                    if name.lower() != "alto":
                        raise AltoError(f"not ALTO: root element is <{name}>")
                    seen_root = True
                elif name == "Page":
                    page.n_pages += 1
                    if page.n_pages == 1:
                        w, h = _num(node.get("WIDTH")), _num(node.get("HEIGHT"))
                        page.width = round(w * page.scale, 1) if w else None
                        page.height = round(h * page.scale, 1) if h else None
                        page.pc = _num(node.get("PC"))
                    open_groups.append(node.get("ID") or f"_page{page.n_pages}")
                elif name == "ComposedBlock" and node.get("ID"):
                    open_groups.append(node.get("ID"))
                    node.set("_group", "1")
                continue
            if name == "TextBlock":
                block = reader.block(node)
                page.blocks.setdefault(block.block_id, block)
                for group in open_groups:
                    page.groups.setdefault(group, []).append(block.block_id)
                node.clear()  # the subtree is read: drop it
            elif name == "MeasurementUnit" and node.text:
                reader.set_unit(node.text)
            elif name == "processingStepDescription" and node.text and page.ocr_brut is None:
                if m := OCR_BRUT.search(node.text):
                    page.ocr_brut = _num(m.group(1).replace(",", "."))
            elif name == "fileIdentifier" and node.text and page.file_identifier is None:
                page.file_identifier = node.text.strip()
            elif name in ("TextLine", "String"):
                continue  # read with their block
            elif name in ("Page", "ComposedBlock") and open_groups and (name == "Page" or node.get("_group")):
                open_groups.pop()
                node.clear()
            elif name in ("PrintSpace", "TopMargin", "BottomMargin", "LeftMargin", "RightMargin",
                          "ComposedBlock", "Illustration", "GraphicalElement"):
                node.clear()
    except DefusedXmlException as exc:
        raise AltoError(f"XML with entity or DTD declarations refused: {exc}") from None
    except (SyntaxError, EOFError, OSError) as exc:  # ParseError is a SyntaxError; gzip damage is OSError
        raise AltoError(f"malformed ALTO XML: {exc}") from None
    if not seen_root:
        raise AltoError("empty ALTO file")
    if page.n_pages == 0:
        raise AltoError("ALTO file has no Page")
    return page
