"""What importing pymupdf costs a process: pymupdf as it imports itself (its layout and
pymupdf4llm add-ons, each opening onnxruntime) against tasks/pdf_library.py (without them),
each a new interpreter, in the same run.

    .venv/bin/python bench/bench_pdf_import.py [--repeats 7]

Every process that reads PDFs pays this once: each ingest command, each parser-sandbox child
that parses a PDF, the reading room. The two variants alternate `--repeats` times (so a burst of
load from another process falls on both); the figure is the median of each one's CPU seconds
(user + system, of the child, from the kernel), with the spread, and the median of the paired
ratios. The bare interpreter (`python -c pass`) is measured the same way, for scale.
Results: JSON on stdout and bench/results/pdf_import.json; copy the table into docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import save_report  # noqa: E402

VARIANTS = {
    "bare interpreter": "pass",
    "import pymupdf (with its add-ons)": "import pymupdf",
    "tasks.pdf_library (without them)": "from tasks.pdf_library import pymupdf",
}


def child_cpu_s(code: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(args.repeats):
        for name, code in VARIANTS.items():
            runs[name].append(child_cpu_s(code))
    plain, ours = runs["import pymupdf (with its add-ons)"], runs["tasks.pdf_library (without them)"]
    report = {
        "repeats": args.repeats, "load_average": os.getloadavg(),
        "cpu_s": {name: {"median": statistics.median(v), "min": min(v), "max": max(v)} for name, v in runs.items()},
        "ratio_plain_over_ours": statistics.median(p / o for p, o in zip(plain, ours)),
    }
    save_report("pdf_import", report)
    print("| process | CPU-s (median) | min–max |\n|---|---:|---:|", file=sys.stderr)
    for name, v in runs.items():
        print(f"| {name} | {statistics.median(v):.3f} | {min(v):.3f}–{max(v):.3f} |", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
