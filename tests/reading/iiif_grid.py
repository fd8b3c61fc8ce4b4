"""The IIIF Image validator's test image, delivered as a scanned PDF (see test_iiif_validator.py)."""
from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

PAGE_POINTS = 480  # × the room's 150 dpi / 72 = the test image's 1000 pixels


def validator_test_image() -> Image.Image | None:
    """1000 × 1000 pixels: square (column, row) of 100 pixels in the validator's colour for it;
    None without the validator (its test is skipped then)."""
    try:
        from iiif_validator.validator import ValidationInfo
    except ImportError:
        return None
    colours = ValidationInfo().colorInfo
    image = Image.new("RGB", (1000, 1000))
    for column in range(10):
        for row in range(10):
            image.paste(colours[column][row],
                        (column * 100, row * 100, column * 100 + 100, row * 100 + 100))
    return image


def write_scanned_pdf(image: Image.Image, path: Path) -> None:
    """One page: the image over the whole page, and an invisible text layer (render mode 3)."""
    import pymupdf

    png = io.BytesIO()
    image.save(png, format="PNG")
    with pymupdf.open() as doc:
        page = doc.new_page(width=PAGE_POINTS, height=PAGE_POINTS)
        page.insert_image(page.rect, stream=png.getvalue())
        page.insert_text((20, 40), "Mire de contrôle du validateur IIIF : cent carrés de couleur, "
                         "dix colonnes et dix rangées.", fontsize=9, render_mode=3)
        doc.save(path)
