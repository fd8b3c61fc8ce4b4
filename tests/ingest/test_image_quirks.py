"""Readable scans that used to be refused for their wrappers: a JPEG whose EXIF block holds values
Pillow cannot write back or turn into a resolution, and a BigTIFF. Both are inspected, OCRed and
read upright. The fixtures are made here with Pillow."""
from __future__ import annotations

import io
import struct

import pytest
from PIL import Image, ImageDraw, ImageFont

from flows.make_sample import FONT_FILE
from schemas.settings import InspectionLimits, ParseSettings
from tasks.ingest.inspect import inspect_revision, sniff_media_type
from tasks.ingest.parse.image import parse_image
from tests.fixtures.make_samples import revision_for

WORDS = "Registre des délibérations municipales"


def line_scan() -> Image.Image:
    """One printed line on a small page: enough for OCR to read, fast to read."""
    image = Image.new("L", (1300, 140), 255)
    ImageDraw.Draw(image).text((30, 35), WORDS, font=ImageFont.truetype(str(FONT_FILE), 52), fill=0)
    return image


def exif_block(entries: list[tuple[int, int, bytes]]) -> bytes:
    """A little-endian EXIF APP1 payload: one IFD of (tag, type, value bytes); values longer than
    four bytes go after the IFD."""
    offset = 8 + 2 + 12 * len(entries) + 4
    ifd, tail = struct.pack("<H", len(entries)), b""
    for tag, kind, value in entries:
        count = {3: len(value) // 2, 12: len(value) // 8}.get(kind, len(value))
        if len(value) <= 4:
            ifd += struct.pack("<HHI", tag, kind, count) + value.ljust(4, b"\0")
        else:
            ifd += struct.pack("<HHII", tag, kind, count, offset + len(tail))
            tail += value
    return b"Exif\0\0II*\0" + struct.pack("<I", 8) + ifd + b"\0\0\0\0" + tail


def jpeg_with_exif(image: Image.Image, exif: bytes) -> bytes:
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    data = out.getvalue()
    app0 = struct.unpack(">H", data[4:6])[0]  # drop JFIF: the resolution then comes from EXIF
    segment = b"\xff\xe1" + struct.pack(">H", len(exif) + 2) + exif
    return data[:2] + segment + data[4 + app0:]


ORIENTATION, X_RESOLUTION, RESOLUTION_UNIT = 0x0112, 0x011A, 0x0128
SHORT, DOUBLE = 3, 12
BAD_EXIF = {
    # stored upside down, EXIF says turn it; its NaN resolution made Pillow's exif_transpose fail
    # while writing the EXIF block back
    "turned, NaN resolution": (line_scan().rotate(180), exif_block([
        (ORIENTATION, SHORT, struct.pack("<H", 3)), (X_RESOLUTION, DOUBLE, struct.pack("<d", float("nan")))])),
    # an infinite resolution in centimetres became an infinite dpi, and int() of it an OverflowError
    "infinite resolution": (line_scan(), exif_block([
        (X_RESOLUTION, DOUBLE, struct.pack("<d", float("inf"))), (RESOLUTION_UNIT, SHORT, struct.pack("<H", 3))])),
}


@pytest.mark.parametrize("case", list(BAD_EXIF))
def test_a_jpeg_with_a_bad_exif_block_is_read_upright(case):
    image, exif = BAD_EXIF[case]
    data = jpeg_with_exif(image, exif)
    accepted, refused = inspect_revision(revision_for("scan.jpg", data), data, InspectionLimits())
    assert refused is None and accepted.media_type == "image/jpeg"
    page = parse_image(data, accepted, ParseSettings()).pages[0]
    assert "Registre" in page.raw_text and "municipales" in page.raw_text, page.raw_text
    assert page.dpi == 300  # the resolution it could not state: the default for scans


def test_a_bigtiff_is_inspected_and_read():
    out = io.BytesIO()
    line_scan().save(out, "TIFF", big_tiff=True, dpi=(300, 300))  # uncompressed: libtiff writes classic TIFF
    data = out.getvalue()
    assert data[:4] == b"II+\0" and sniff_media_type(data) == "image/tiff"
    accepted, refused = inspect_revision(revision_for("registre.tif", data), data, InspectionLimits())
    assert refused is None, refused
    page = parse_image(data, accepted, ParseSettings()).pages[0]
    assert "Registre" in page.raw_text and "municipales" in page.raw_text, page.raw_text


@pytest.mark.parametrize(("error", "becomes"), [
    ("out of memory when reading image file", MemoryError),  # PIL's decoder status -9
    ("broken data stream when reading image file", None),
])
def test_a_decoder_out_of_memory_is_the_memory_limit_not_a_malformed_image(monkeypatch, error, becomes):
    """A decoder that could not allocate met the parse's memory limit: a refusal "malformed
    image" would be remembered as lasting for a file nothing is wrong with."""
    from tasks.ingest.parse import image
    from tasks.ingest.parse.errors import ParseRefused

    def failing(*_):
        raise OSError(error)
    monkeypatch.setattr(image, "image_pages", failing)
    data = b"\x89PNG\r\n\x1a\n"
    with pytest.raises(becomes or ParseRefused) as raised:
        parse_image(data, revision_for("page.png", data, "image/png"), ParseSettings())
    assert becomes or str(raised.value) == f"malformed image: {error}"
