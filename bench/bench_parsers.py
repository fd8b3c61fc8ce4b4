"""Parsing benchmarks (issues 3 and 10): pages/s for the text-layer, OCR and ALTO paths; the OCR
path against raw single-threaded tesseract measured in the same run; OCR scaling with workers;
where the time of a page goes; the cost of a scan fed turned 90°.

    .venv/bin/python bench/bench_parsers.py [--dense-pages 12] [--light-pages 6] [--repeats 3]

Two page sets, both rendered at 300 dpi: `light`, the bundled sample texts (a third of a page
each), and `dense`, full A4 pages typeset from the shared corpus's texts (bench/ocr_cer.py). For
each set, interleaved round-robin over the repeats (medians):
- raw `tesseract`: the Debian CLI with OMP_THREAD_LIMIT=1 on the same pages as PNG files, one
  process after another, plain text out — the baseline, with nothing of ours around it;
- raw engine: the in-process library alone (tesserocr) on the decoded pixels, one engine made
  once, plain text out — what the OCR path calls;
- the OCR path (`parse_pdf` on the scanned PDF): render, denoise, recognition, word boxes and
  confidences, the ParsedPage — with 1 and 2 workers.
The profile splits one pass over the dense pages by step, next to what the former path paid
(PIL's median filter, a PNG per page, a tesseract process and its model load per page).
Results: JSON on stdout and bench/results/parsers.json, Markdown tables on stderr.
"""
from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image, ImageFilter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import save_report  # noqa: E402
from bench.ocr_cer import dense_texts  # noqa: E402

from flows.make_sample import alto_xml, digital_pdf, render_scan, scanned_pdf, image_bytes, source_text  # noqa: E402
from schemas.settings import MabillonSettings, OcrSettings  # noqa: E402
from tasks.ingest.parse import ocr  # noqa: E402
from tasks.ingest.parse.alto import parse_alto  # noqa: E402
from tasks.ingest.parse.cer import character_error_rate  # noqa: E402
from tasks.ingest.parse.pdf import parse_pdf  # noqa: E402
from tasks.ingest.render import render_pdf_page  # noqa: E402
from tests.fixtures.make_samples import revision_for  # noqa: E402

TEXTS = ["registre-1793", "affiche-1848", "etat-civil-1854", "cahier-doleances-1789",
         "lettre-prefet-1871", "note-service-1952", "courrier-canton-1902"]


def median_rate(pages: int, run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return pages / statistics.median(times)


def turned(image: Image.Image) -> Image.Image:
    """The page as fed a quarter turned (counter-clockwise), its resolution kept."""
    out = image.rotate(90, expand=True)
    out.info["dpi"] = image.info.get("dpi", (300, 300))
    return out


def raw_tesseract(pngs: list[Path], language: str) -> None:
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    for png in pngs:
        subprocess.run(["tesseract", str(png), "stdout", "-l", language], check=True,
                       capture_output=True, env=env)


def raw_engine(pixels: list[np.ndarray], settings: OcrSettings) -> None:
    path = ocr.tessdata_dir(settings.tessdata, settings.language)
    with ocr.ENGINES.lend(path, settings.language, settings.page_segmentation) as engine:
        for page in pixels:
            height, width = page.shape
            engine.SetImageBytes(page.tobytes(), width, height, 1, width)
            engine.SetSourceResolution(300)
            engine.GetUTF8Text()


def page_set(name: str, texts: list[str], tmp: Path) -> dict:
    scans = [render_scan(t) for t in texts]
    pngs = []
    for i, image in enumerate(scans):
        pngs.append(tmp / f"{name}-{i}.png")
        pngs[-1].write_bytes(image_bytes(image, "PNG"))
    pdf = scanned_pdf(scans)
    return {"texts": texts, "scans": scans, "pngs": pngs, "pdf": pdf,
            "revision": revision_for(f"{name}.pdf", pdf),
            "pixels": [np.asarray(Image.open(p).convert("L")) for p in pngs]}


def profile(pages: dict, settings: OcrSettings) -> dict[str, float]:
    """Seconds per page for each step of the OCR path, and for what the former path paid."""
    steps: dict[str, list[float]] = {}

    def timed(key: str, run: Callable[[], object]) -> object:
        start = time.perf_counter()
        out = run()
        steps.setdefault(key, []).append(time.perf_counter() - start)
        return out

    path = ocr.tessdata_dir(settings.tessdata, settings.language)
    blank = pages["pngs"][0].with_name("blank.png")
    Image.new("L", (64, 64), 255).save(blank, dpi=(300, 300))
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    with pymupdf.open(stream=pages["pdf"], filetype="pdf") as doc, \
            ocr.ENGINES.lend(path, settings.language, settings.page_segmentation) as engine:
        for number in range(len(doc)):
            render = timed("render", lambda: render_pdf_page(doc[number], settings.dpi, 10**9))
            pixels = timed("denoise (numpy median)", lambda: ocr.prepare(render, settings))
            timed("hand-over (pixels to the engine)", lambda: ocr._hand_over(engine, pixels, render.dpi))
            timed("recognition (tesseract)", lambda: engine.Recognize(0))
            timed("words, boxes, ParsedPage", lambda: ocr.assemble(ocr.words_of(engine), render.scale))
            # what the former path paid per page, instead of the denoise and hand-over above
            timed("former: PIL MedianFilter(3)", lambda: render.image.filter(ImageFilter.MedianFilter(3)))
            timed("former: PNG written per page", lambda: render.image.save(io.BytesIO(), format="PNG"))
            timed("former: a tesseract process + model load", lambda: subprocess.run(
                ["tesseract", str(blank), "stdout", "-l", settings.language], check=True,
                capture_output=True, env=env))
    return {key: statistics.mean(values) for key, values in steps.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--light-pages", type=int, default=6)
    parser.add_argument("--dense-pages", type=int, default=12)
    parser.add_argument("--text-pages", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    base = MabillonSettings()
    light = [source_text(TEXTS[i % len(TEXTS)]) for i in range(max(args.light_pages, args.text_pages))]
    results: dict = {"cpus": os.cpu_count(), "load_average_before": os.getloadavg()[0],
                     "light_pages": args.light_pages, "dense_pages": args.dense_pages,
                     "text_pages": args.text_pages, "repeats": args.repeats,
                     "engine": f"tesseract {ocr.tesseract_version()} in process (tesserocr)",
                     "cli": subprocess.run(["tesseract", "--version"], capture_output=True,
                                           text=True).stdout.split("\n", 1)[0]}

    text_pdf = digital_pdf(light[:args.text_pages])
    rev = revision_for("bench.pdf", text_pdf)
    results["text_layer_pages_s"] = median_rate(args.text_pages, lambda: parse_pdf(text_pdf, rev, base), args.repeats)
    alto = alto_xml(source_text("courrier-canton-1902")).encode()
    alto_rev = revision_for("bench.xml", alto)
    results["alto_pages_s"] = median_rate(200, lambda: [parse_alto(alto, alto_rev, base) for _ in range(200)],
                                          args.repeats)

    with tempfile.TemporaryDirectory() as tmp:
        sets = {"light": page_set("light", light[:args.light_pages], Path(tmp)),
                "dense": page_set("dense", dense_texts(args.dense_pages), Path(tmp))}
        runs: dict[str, tuple[int, Callable[[], object]]] = {}
        for name, pages in sets.items():
            count = len(pages["texts"])
            runs[f"{name}_raw_tesseract"] = (count, lambda p=pages: raw_tesseract(p["pngs"], base.ocr.language))
            runs[f"{name}_raw_engine"] = (count, lambda p=pages: raw_engine(p["pixels"], base.ocr))
            for workers in (1, 2):
                settings = base.model_copy(update={"ocr": OcrSettings(workers=workers)})
                runs[f"{name}_ocr_workers_{workers}"] = (
                    count, lambda p=pages, s=settings: parse_pdf(p["pdf"], p["revision"], s))
        turned_pdf = scanned_pdf([turned(image) for image in sets["light"]["scans"]])
        turned_rev = revision_for("turned.pdf", turned_pdf)
        runs["light_ocr_turned_90"] = (args.light_pages, lambda: parse_pdf(turned_pdf, turned_rev, base))
        raw_engine(sets["light"]["pixels"][:1], base.ocr)  # the engine is made before timing
        # Round-robin over the configurations, so load from elsewhere on a shared machine
        # spreads over all of them instead of biasing whichever ran at the busy moment.
        times: dict[str, list[float]] = {key: [] for key in runs}
        for _ in range(args.repeats):
            for key, (_, run) in runs.items():
                start = time.perf_counter()
                run()
                times[key].append(time.perf_counter() - start)
        results.update({f"{key}_pages_s": count / statistics.median(times[key])
                        for key, (count, _) in runs.items()})
        results["profile_dense_s_per_page"] = profile(sets["dense"], base.ocr)
        for name, pages in sets.items():
            parsed = parse_pdf(pages["pdf"], pages["revision"], base)
            results[f"{name}_mean_cer"] = statistics.mean(
                character_error_rate(t, p.raw_text) for t, p in zip(pages["texts"], parsed.pages))
        parsed_turned = parse_pdf(turned_pdf, turned_rev, base)
    results["light_turned_90_mean_cer"] = statistics.mean(
        character_error_rate(t, p.raw_text) for t, p in zip(light, parsed_turned.pages))
    results["light_turned_90_pages_turned"] = sum(p.rotation == 90 for p in parsed_turned.pages)
    for name in sets:
        raw = results[f"{name}_raw_tesseract_pages_s"]
        for key in ("raw_engine", "ocr_workers_1", "ocr_workers_2"):
            results[f"{name}_{key}_vs_raw"] = results[f"{name}_{key}_pages_s"] / raw
        results[f"{name}_scaling_2_vs_1"] = (results[f"{name}_ocr_workers_2_pages_s"]
                                             / results[f"{name}_ocr_workers_1_pages_s"])
    results["light_turned_90_vs_upright"] = (results["light_ocr_turned_90_pages_s"]
                                             / results["light_ocr_workers_2_pages_s"])
    results["load_average_after"] = os.getloadavg()[0]
    save_report("parsers", results)
    sys.stderr.write(markdown(results))
    return 0


def markdown(r: dict) -> str:
    lines = ["| path | light pages/s | vs raw | dense pages/s | vs raw |", "|---|---:|---:|---:|---:|"]
    rows = [("raw `tesseract` CLI, one thread, page after page (baseline)", "raw_tesseract"),
            ("raw engine in process, nothing of ours around it", "raw_engine"),
            ("OCR path (scanned PDF), 1 worker", "ocr_workers_1"),
            ("OCR path (scanned PDF), 2 workers", "ocr_workers_2")]
    for label, key in rows:
        cells = []
        for name in ("light", "dense"):
            rate = r[f"{name}_{key}_pages_s"]
            ratio = "1.00" if key == "raw_tesseract" else f"{r[f'{name}_{key}_vs_raw']:.2f}"
            cells += [f"{rate:.2f}", ratio]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    turned_rate = r["light_ocr_turned_90_pages_s"]
    lines.append(f"| OCR path, scans turned 90° (default settings) | {turned_rate:.2f} | "
                 f"{turned_rate / r['light_raw_tesseract_pages_s']:.2f} | | |")
    lines.append(f"| text layer (pymupdf, digital PDF) | {r['text_layer_pages_s']:.0f} | | | |")
    lines.append(f"| ALTO (read directly) | {r['alto_pages_s']:.0f} | | | |")
    lines += ["", "| step (dense page) | s/page |", "|---|---:|"]
    lines += [f"| {k} | {v:.4f} |" for k, v in r["profile_dense_s_per_page"].items()]
    return "\n".join(lines) + (
        f"\n\nengine: {r['engine']}; CLI: {r['cli']}\n"
        f"mean CER of the OCR path: light {r['light_mean_cer']:.4f}, dense {r['dense_mean_cer']:.4f}; "
        f"{r['cpus']} CPUs, load average {r['load_average_before']:.1f} before, "
        f"{r['load_average_after']:.1f} after\n"
        f"turned 90°: {r['light_turned_90_pages_turned']} of {r['light_pages']} pages "
        f"turned upright, mean CER {r['light_turned_90_mean_cer']:.4f}, "
        f"{r['light_turned_90_vs_upright']:.2f}× the upright rate (2 workers)\n")


if __name__ == "__main__":
    sys.exit(main())
