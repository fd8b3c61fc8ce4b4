"""Build the bundled multi-format sample: `python -m flows.make_sample OUTDIR [--with-refusals]`.

Text formats (plain text, HTML, ALTO, the sidecar) are committed in docs/sample/; the binary
formats (digital PDF, scans as PNG/JPEG/TIFF, a scanned PDF, DOCX) are generated here from the
texts in docs/sample/sources/, so no large binaries are committed and every scan has a known
ground truth for the character error rate. Tests build their fixtures with the same functions.
"""
from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tasks.pdf_library import pymupdf
from PIL import Image

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "docs" / "sample"
SOURCES_DIR = SAMPLE_DIR / "sources"
# pymupdf's base-14 fonts have no "œ"; a real TrueType font does (Debian: fonts-dejavu-core).
FONT_FILE = Path("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf")
A4 = (595.0, 842.0)
MARGIN = 64.0


def _font_file() -> Path:
    if not FONT_FILE.exists():
        raise FileNotFoundError(f"{FONT_FILE} is missing: install the Debian package fonts-dejavu-core")
    return FONT_FILE


def typeset(pages: list[str], fontsize: float = 11.0) -> pymupdf.Document:
    """An A4 document with each text on its own page, set in DejaVu Serif (a real text layer)."""
    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page(width=A4[0], height=A4[1])
        page.insert_font(fontname="dejavu", fontfile=str(_font_file()))
        rect = pymupdf.Rect(MARGIN, MARGIN, A4[0] - MARGIN, A4[1] - MARGIN)
        left = page.insert_textbox(rect, text, fontname="dejavu", fontsize=fontsize, lineheight=1.4)
        if left < 0:
            raise ValueError(f"text of {len(text)} characters does not fit on one A4 page")
    return doc


def digital_pdf(pages: list[str]) -> bytes:
    doc = typeset(pages)
    doc.subset_fonts()  # embed only the glyphs used: a few kB instead of the whole font
    return doc.tobytes(garbage=3, deflate=True)


def render_scan(text: str, dpi: int = 300, angle: float = 0.0, noise: float = 0.0,
                seed: int = 0) -> Image.Image:
    """A greyscale page image as a scanner would give it: optionally skewed and speckled.

    `noise` is the standard deviation of Gaussian grain (in grey levels) plus, in proportion,
    isolated dark specks; the seed makes the same arguments give the same pixels.
    """
    pix = typeset([text])[0].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
    image = Image.frombytes("L", (pix.width, pix.height), pix.samples)
    if angle:
        image = image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    if noise:
        rng = np.random.default_rng(seed)
        pixels = np.asarray(image, dtype=np.float32)
        pixels = pixels + rng.normal(0.0, noise, pixels.shape)
        specks = rng.random(pixels.shape) < noise / 20000.0
        pixels[specks] = 0.0
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="L")
    image.info["dpi"] = (dpi, dpi)
    return image


def image_bytes(image: Image.Image, fmt: str) -> bytes:
    """PNG, JPEG or TIFF bytes carrying the image's resolution."""
    out = io.BytesIO()
    dpi = image.info.get("dpi", (300, 300))
    options: dict = {"dpi": dpi}
    if fmt == "JPEG":
        options["quality"] = 90
    if fmt == "TIFF":
        options["compression"] = "tiff_lzw"
    image.save(out, format=fmt, **options)
    return out.getvalue()


def scanned_pdf(images: list[Image.Image]) -> bytes:
    """A PDF of page images only, without a text layer, as a scanner's PDF export."""
    doc = pymupdf.open()
    for image in images:
        dpi = image.info.get("dpi", (300, 300))[0]
        page = doc.new_page(width=image.width * 72 / dpi, height=image.height * 72 / dpi)
        page.insert_image(page.rect, stream=image_bytes(image, "PNG"))
    return doc.tobytes(garbage=3, deflate=True)


def docx_bytes(text: str) -> bytes:
    """A Word document: the first line as a heading, the rest as paragraphs."""
    import docx  # python-docx, only needed to build samples

    title, _, body = text.strip().partition("\n")
    document = docx.Document()
    document.add_heading(title.strip(), level=1)
    for paragraph in body.strip().split("\n\n"):
        document.add_paragraph(" ".join(line.strip() for line in paragraph.strip().splitlines()))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def alto_xml(text: str, page_width: int = 2480, page_height: int = 3508,
             char_width: int = 22, line_height: int = 60, margin: int = 200) -> str:
    """ALTO v4 in pixels as a newspaper OCR would deliver it: blocks, lines, words with WC.

    Words that do not fit at a line end are split with a HYP; word confidences vary
    deterministically so a reader can tell them apart from a constant.
    """
    from xml.sax.saxutils import quoteattr

    max_chars = (page_width - 2 * margin) // char_width
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<alto xmlns="http://www.loc.gov/standards/alto/ns-v4#">',
           '<Description><MeasurementUnit>pixel</MeasurementUnit></Description>',
           f'<Layout><Page ID="P1" PHYSICAL_IMG_NR="1" WIDTH="{page_width}" HEIGHT="{page_height}">',
           f'<PrintSpace HPOS="{margin}" VPOS="{margin}" WIDTH="{page_width - 2 * margin}" '
           f'HEIGHT="{page_height - 2 * margin}">']
    y = margin
    n_word = 0
    for b, paragraph in enumerate(p for p in text.strip().split("\n\n") if p.strip()):
        lines: list[list[str]] = [[]]
        used = 0
        for word in paragraph.split():
            need = len(word) + (1 if lines[-1] else 0)
            if used + need <= max_chars:
                lines[-1].append(word)
                used += need
                continue
            room = max_chars - used - 2
            if len(word) >= 8 and room >= 3:  # hyphenate the way a compositor would
                lines[-1].append(word[:room] + "\u00ad")
                word = word[room:]
            lines.append([word])
            used = len(word)
        block_top = y
        body = []
        for l, words in enumerate(lines):
            x = margin
            body.append(f'<TextLine ID="B{b}L{l}" HPOS="{margin}" VPOS="{y}" '
                        f'WIDTH="{used_width(words, char_width)}" HEIGHT="{line_height - 12}">')
            for w, word in enumerate(words):
                hyphenated = word.endswith("\u00ad")
                word = word.rstrip("\u00ad")
                width = len(word) * char_width
                wc = 0.80 + (n_word * 37 % 20) / 100
                n_word += 1
                if w:
                    body.append(f'<SP HPOS="{x - char_width}" VPOS="{y}" WIDTH="{char_width}"/>')
                body.append(f'<String ID="W{n_word}" CONTENT={quoteattr(word)} HPOS="{x}" VPOS="{y}" '
                            f'WIDTH="{width}" HEIGHT="{line_height - 12}" WC="{wc:.2f}"/>')
                x += width + char_width
                if hyphenated:
                    body.append(f'<HYP CONTENT="-" HPOS="{x - char_width}" VPOS="{y}" WIDTH="{char_width}"/>')
            body.append('</TextLine>')
            y += line_height
        out.append(f'<TextBlock ID="B{b}" HPOS="{margin}" VPOS="{block_top}" '
                   f'WIDTH="{page_width - 2 * margin}" HEIGHT="{y - block_top}">')
        out.extend(body)
        out.append('</TextBlock>')
        y += line_height // 2
    out.append('</PrintSpace></Page></Layout></alto>')
    return "\n".join(out) + "\n"


def used_width(words: list[str], char_width: int) -> int:
    return (sum(len(w.rstrip("\u00ad")) for w in words) + max(len(words) - 1, 0)) * char_width


def encrypted_pdf(text: str, password: str = "secret") -> bytes:
    return typeset([text]).tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256,
                                   owner_pw=password + "-owner", user_pw=password)


def source_text(name: str) -> str:
    return (SOURCES_DIR / f"{name}.txt").read_text(encoding="utf-8")


# file name in the sample → how to make its bytes from the source texts
GENERATED: dict[str, Callable[[], bytes]] = {
    "lettre-prefet-1871.pdf": lambda: digital_pdf([source_text("lettre-prefet-1871")]),
    "registre-1793.png": lambda: image_bytes(render_scan(source_text("registre-1793")), "PNG"),
    "affiche-1848.jpg": lambda: image_bytes(render_scan(source_text("affiche-1848"), noise=6, seed=3), "JPEG"),
    "etat-civil-1854.tif": lambda: image_bytes(
        render_scan(source_text("etat-civil-1854"), angle=1.0, noise=12, seed=7), "TIFF"),
    "cahier-doleances-1789.pdf": lambda: scanned_pdf([render_scan(source_text("cahier-doleances-1789"))]),
    "note-service-1952.docx": lambda: docx_bytes(source_text("note-service-1952")),
}

# Files that must be refused, for a demo of quarantine next to the accepted ones.
REFUSALS: dict[str, Callable[[], bytes]] = {
    "refus/confidentiel.pdf": lambda: encrypted_pdf(source_text("lettre-prefet-1871")),
    "refus/vide.txt": lambda: b"",
    "refus/photo.jpg": lambda: b"MZ\x90\x00\x03\x00\x00\x00" + bytes(200),
}


def committed_files() -> list[Path]:
    return sorted(p for p in SAMPLE_DIR.iterdir() if p.is_file())


def make_sample(outdir: Path, with_refusals: bool = False) -> list[Path]:
    """Write the full sample folder (committed text files + generated binaries); returns the files."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in committed_files():
        written.append(Path(shutil.copyfile(path, outdir / path.name)))
    makers = {**GENERATED, **(REFUSALS if with_refusals else {})}
    for name, make in makers.items():
        target = outdir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(make())
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.make_sample", description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--with-refusals", action="store_true",
                        help="also write an encrypted PDF, an empty file and a disguised file")
    args = parser.parse_args(argv)
    files = make_sample(args.outdir, args.with_refusals)
    sys.stdout.write(json.dumps({"outdir": str(args.outdir), "files": len(files)}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
