"""Parsing benchmarks (issue 3): pages/s for the text-layer, OCR and ALTO paths, OCR against the
raw tesseract page rate of this machine measured in the same run, OCR scaling with workers, and
the cost of a scan fed turned 90° (detected and read upright) against the same scan upright.

    .venv/bin/python bench/bench_parsers.py [--scan-pages 6] [--text-pages 40] [--repeats 3]

Inputs are generated from the bundled sample texts (flows/make_sample.py), so every run reads
the same pages. Figures are medians over the repeats. "raw tesseract" is the `tesseract` command
on the same page PNGs, one process after another, with nothing of ours around it; the OCR path
adds rendering the scanned PDF, denoising, word boxes and the ParsedPage. OpenMP inside tesseract
is measured both ways (OMP_THREAD_LIMIT unset / =1), since it competes with page workers for the
cores. Results: JSON on stdout and bench/results/parsers.json, a Markdown table on stderr.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import save_report  # noqa: E402

from flows.make_sample import alto_xml, digital_pdf, render_scan, scanned_pdf, image_bytes, source_text  # noqa: E402
from schemas.settings import MabillonSettings, OcrSettings  # noqa: E402
from tasks.ingest.parse.alto import parse_alto  # noqa: E402
from tasks.ingest.parse.cer import character_error_rate  # noqa: E402
from tasks.ingest.parse.pdf import parse_pdf  # noqa: E402
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


def with_omp(threads: int, run: Callable[[], object]) -> object:
    """Run with tesseract's OpenMP limited to `threads` (0: its default, all cores)."""
    os.environ.pop("OMP_THREAD_LIMIT", None)
    if threads:
        os.environ["OMP_THREAD_LIMIT"] = str(threads)
    try:
        return run()
    finally:
        os.environ.pop("OMP_THREAD_LIMIT", None)


def turned(image: Image.Image) -> Image.Image:
    """The page as fed a quarter turned (counter-clockwise), its resolution kept."""
    out = image.rotate(90, expand=True)
    out.info["dpi"] = image.info.get("dpi", (300, 300))
    return out


def raw_tesseract(pngs: list[Path], language: str) -> None:
    for png in pngs:
        subprocess.run(["tesseract", str(png), "stdout", "-l", language], check=True,
                       capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scan-pages", type=int, default=6)
    parser.add_argument("--text-pages", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    base = MabillonSettings()
    texts = [source_text(TEXTS[i % len(TEXTS)]) for i in range(max(args.scan_pages, args.text_pages))]

    text_pdf = digital_pdf(texts[:args.text_pages])
    scans = [render_scan(t) for t in texts[:args.scan_pages]]
    scan_pdf = scanned_pdf(scans)
    # the same pages fed a quarter turned: OCR reads them upright after an orientation check
    turned_pdf = scanned_pdf([turned(image) for image in scans])
    alto = alto_xml(source_text("courrier-canton-1902")).encode()
    results: dict = {"cpus": os.cpu_count(), "load_average_before": os.getloadavg()[0],
                     "scan_pages": args.scan_pages,
                     "text_pages": args.text_pages, "repeats": args.repeats}

    rev = revision_for("bench.pdf", text_pdf)
    results["text_layer_pages_s"] = median_rate(args.text_pages, lambda: parse_pdf(text_pdf, rev, base), args.repeats)
    alto_rev = revision_for("bench.xml", alto)
    results["alto_pages_s"] = median_rate(200, lambda: [parse_alto(alto, alto_rev, base) for _ in range(200)],
                                          args.repeats)

    scan_rev = revision_for("scan.pdf", scan_pdf)
    with tempfile.TemporaryDirectory() as tmp:
        pngs = []
        for i, image in enumerate(scans):
            pngs.append(Path(tmp) / f"p{i}.png")
            pngs[-1].write_bytes(image_bytes(image, "PNG"))
        runs: dict[str, Callable[[], object]] = {}
        for omp, threads in (("default", 0), ("1", 1)):
            runs[f"raw_tesseract_pages_s_omp_{omp}"] = lambda t=threads: with_omp(t, lambda: raw_tesseract(pngs, base.ocr.language))
            for workers in (1, 2):
                settings = base.model_copy(update={"ocr": OcrSettings(workers=workers, tesseract_threads=threads)})
                runs[f"ocr_pages_s_workers_{workers}_omp_{omp}"] = (
                    lambda t=threads, s=settings: with_omp(t, lambda: parse_pdf(scan_pdf, scan_rev, s)))
        turned_rev = revision_for("turned.pdf", turned_pdf)
        runs["ocr_pages_s_turned_90"] = lambda: with_omp(base.ocr.tesseract_threads,
                                                         lambda: parse_pdf(turned_pdf, turned_rev, base))
        # Round-robin over the configurations, so load from elsewhere on a shared machine
        # spreads over all of them instead of biasing whichever ran at the busy moment.
        times: dict[str, list[float]] = {key: [] for key in runs}
        for _ in range(args.repeats):
            for key, run in runs.items():
                start = time.perf_counter()
                run()
                times[key].append(time.perf_counter() - start)
        results.update({key: args.scan_pages / statistics.median(t) for key, t in times.items()})
        parsed = parse_pdf(scan_pdf, scan_rev, base)
        parsed_turned = parse_pdf(turned_pdf, turned_rev, base)
    results["ocr_mean_cer"] = statistics.mean(
        character_error_rate(t, p.raw_text) for t, p in zip(texts, parsed.pages))
    results["ocr_turned_90_mean_cer"] = statistics.mean(
        character_error_rate(t, p.raw_text) for t, p in zip(texts, parsed_turned.pages))
    results["ocr_turned_90_pages_turned"] = sum(p.rotation == 90 for p in parsed_turned.pages)
    # the default settings (2 workers, 1 tesseract thread) on the upright pages, same run
    results["ocr_turned_90_vs_upright"] = (results["ocr_pages_s_turned_90"]
                                           / results["ocr_pages_s_workers_2_omp_1"])
    for omp in ("default", "1"):
        raw = results[f"raw_tesseract_pages_s_omp_{omp}"]
        one = results[f"ocr_pages_s_workers_1_omp_{omp}"]
        results[f"ocr_vs_raw_omp_{omp}"] = one / raw
        results[f"ocr_scaling_2_vs_1_omp_{omp}"] = results[f"ocr_pages_s_workers_2_omp_{omp}"] / one

    results["load_average_after"] = os.getloadavg()[0]
    save_report("parsers", results)
    sys.stderr.write(markdown(results))
    return 0


def markdown(r: dict) -> str:
    rows = [("text layer (pymupdf, digital PDF)", f"{r['text_layer_pages_s']:.0f}", ""),
            ("ALTO (read directly)", f"{r['alto_pages_s']:.0f}", "")]
    for omp, label in (("default", "OpenMP default"), ("1", "OMP_THREAD_LIMIT=1")):
        raw = r[f"raw_tesseract_pages_s_omp_{omp}"]
        rows.append((f"raw `tesseract` CLI, {label}", f"{raw:.2f}", "1.00 (baseline)"))
        for w in (1, 2):
            rate = r[f"ocr_pages_s_workers_{w}_omp_{omp}"]
            rows.append((f"OCR path (scanned PDF), {w} worker(s), {label}", f"{rate:.2f}", f"{rate / raw:.2f}"))
    turned_rate = r["ocr_pages_s_turned_90"]
    rows.append(("OCR path, scans turned 90° (default settings)", f"{turned_rate:.2f}",
                 f"{turned_rate / r['raw_tesseract_pages_s_omp_1']:.2f}"))
    lines = ["| path | pages/s | vs raw tesseract |", "|---|---:|---:|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines) + (f"\n\nmean CER of the OCR path on these pages: {r['ocr_mean_cer']:.4f}; "
                                f"{r['cpus']} CPUs, load average {r['load_average_before']:.1f} before, "
                                f"{r['load_average_after']:.1f} after\n"
                                f"turned 90°: {r['ocr_turned_90_pages_turned']} of {r['scan_pages']} pages "
                                f"turned upright, mean CER {r['ocr_turned_90_mean_cer']:.4f}, "
                                f"{r['ocr_turned_90_vs_upright']:.2f}× the upright rate\n")


if __name__ == "__main__":
    sys.exit(main())
