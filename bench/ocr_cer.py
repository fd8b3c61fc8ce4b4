"""Character error rate of the OCR path on every page set whose text is known (issue 10, item 4:
OCR must not get worse when it gets faster).

    .venv/bin/python bench/ocr_cer.py [--dense-pages 12] [--label after]

Page sets, all generated here from texts we hold, so each page has its ground truth:
- `tests`: the pages of tests/ingest/test_ocr.py — a straight 300-dpi PNG, a TIFF turned 1° with
  heavy grain, the same page scanned turned 90/180/270° (200 dpi) and as a turned scanned PDF;
- `sample`: the scans of the bundled sample (flows/make_sample.py: PNG, JPEG with grain, TIFF
  turned 1° with grain, scanned PDF), parsed as ingest parses them;
- `dense`: dense 300-dpi A4 pages typeset from the shared corpus's texts (the pages of the
  speed benchmark), clean and with scanner grain.
Results: JSON on stdout and bench/results/ocr_cer[-LABEL].json, a table on stderr.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import CORPUS, offline_env, save_report  # noqa: E402

offline_env()

from flows.make_sample import GENERATED, image_bytes, render_scan, scanned_pdf, source_text, typeset  # noqa: E402
from schemas.settings import MabillonSettings, OcrSettings  # noqa: E402
from tasks.ingest.parse import parse_revision  # noqa: E402
from tasks.ingest.parse.cer import character_error_rate  # noqa: E402
from tasks.ingest.parse.image import parse_image  # noqa: E402
from tasks.ingest.parse.pdf import parse_pdf  # noqa: E402
from tests.fixtures import make_samples as fx  # noqa: E402

MEDIA = {"png": "image/png", "jpg": "image/jpeg", "tif": "image/tiff", "pdf": "application/pdf"}
TURNED_DPI = 200


def dense_texts(count: int, corpus: Path = CORPUS) -> list[str]:
    """The first `count` corpus texts long enough to fill an A4 page, cut to what fits on one."""
    texts: list[str] = []
    with corpus.open(encoding="utf-8") as lines:
        for line in lines:
            text = " ".join(json.loads(line)["text"].split())
            if len(text) < 3600:
                continue
            texts.append(fill_page(text))
            if len(texts) == count:
                break
    return texts


def fill_page(text: str) -> str:
    """The longest prefix (by 100 characters, at a word boundary) that fits on one A4 page."""
    for size in range(3500, 500, -100):
        cut = text[:size].rsplit(" ", 1)[0]
        try:
            typeset([cut])
        except ValueError:
            continue
        return cut
    raise ValueError("no prefix of the text fits on a page")


def _turned(degrees: int, dpi: int = TURNED_DPI) -> Image.Image:
    image = render_scan(source_text(fx.STRAIGHT), dpi=dpi)
    turned = image.rotate(degrees, expand=True)
    turned.info["dpi"] = (dpi, dpi)
    return turned


def test_pages() -> list[tuple[str, str, bytes, str, MabillonSettings]]:
    """(name, media type, bytes, reference text, settings) for the test module's pages."""
    base = MabillonSettings()
    straight, rotated = source_text(fx.STRAIGHT), source_text(fx.ROTATED)
    pages = [("straight.png", "image/png", fx.straight_scan("PNG"), straight, base),
             ("rotated-1deg-grain.tif", "image/tiff", fx.rotated_noisy_scan("TIFF"), rotated, base)]
    for degrees in (90, 180, 270):
        pages.append((f"turned-{degrees}.png", "image/png", image_bytes(_turned(degrees), "PNG"),
                      straight, base))
    turned_pdf = base.model_copy(update={"ocr": OcrSettings(dpi=TURNED_DPI)})
    pages.append(("turned-90.pdf", "application/pdf", scanned_pdf([_turned(90)]), straight, turned_pdf))
    return pages


def sample_pages() -> list[tuple[str, str, bytes, str, MabillonSettings]]:
    base = MabillonSettings()
    out = []
    for name, make in GENERATED.items():
        stem, ext = name.rsplit(".", 1)
        if ext not in MEDIA or name == "lettre-prefet-1871.pdf":  # that PDF has a text layer
            continue
        out.append((name, MEDIA[ext], make(), source_text(stem), base))
    return out


def dense_pages(count: int) -> list[tuple[str, str, bytes, str, MabillonSettings]]:
    base = MabillonSettings()
    out = []
    for i, text in enumerate(dense_texts(count)):
        out.append((f"dense-{i:02d}.png", "image/png", image_bytes(render_scan(text), "PNG"), text, base))
        grainy = render_scan(text, noise=12, seed=i)
        out.append((f"dense-{i:02d}-grain.png", "image/png", image_bytes(grainy, "PNG"), text, base))
    return out


def measure(pages: list[tuple[str, str, bytes, str, MabillonSettings]]) -> list[dict]:
    rows = []
    for name, media, data, reference, settings in pages:
        revision = fx.revision_for(name, data, media)
        start = time.perf_counter()
        doc = parse_revision(data, revision, settings)
        seconds = time.perf_counter() - start
        text = "\n\n".join(p.raw_text for p in doc.pages)
        rows.append({"page": name, "cer": character_error_rate(reference, text),
                     "rotation": doc.pages[0].rotation, "seconds": seconds,
                     "parser_version": doc.pages[0].parser_version})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dense-pages", type=int, default=12)
    parser.add_argument("--label", default="", help="suffix of the results file, e.g. before / after")
    args = parser.parse_args()
    sets: dict[str, Callable[[], list]] = {"tests": test_pages, "sample": sample_pages,
                                           "dense": lambda: dense_pages(args.dense_pages)}
    report: dict = {"sets": {}}
    for name, make in sets.items():
        rows = measure(make())
        report["sets"][name] = {"mean_cer": statistics.mean(r["cer"] for r in rows),
                                "max_cer": max(r["cer"] for r in rows), "pages": rows}
    save_report("ocr_cer" + (f"-{args.label}" if args.label else ""), report)
    lines = ["| page set | pages | mean CER | max CER |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {len(v['pages'])} | {v['mean_cer']:.4f} | {v['max_cer']:.4f} |"
              for k, v in report["sets"].items()]
    sys.stderr.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
