"""What the parser sandbox costs (issue 12): the same files parsed in-process and in the child.

    .venv/bin/python bench/bench_sandbox.py [--files 200] [--write docs/benchmarks.md]

Three kinds of file, each parsed `--files` times both ways in the same run: a short text, a
two-page digital PDF, and a page scan (OCR, fewer repeats: it costs seconds). Reported: the
child's start (paid once per child: loading the parsers), and the added time per file once
it runs (pickling the bytes there and the parsed pages back).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import offline_env, replace_section, save_report  # noqa: E402

SECTION = "## Parser sandbox overhead (issue 12)"


def timed(function, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        out.append(time.perf_counter() - started)
    return out


def run(args) -> dict:
    # a loaded machine starts Prefect's ephemeral server slowly
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
    offline_env()
    from schemas.settings import MabillonSettings, SandboxSettings
    from tasks.ingest import sandbox
    from tasks.ingest.parse import parse_revision
    from tests.fixtures import make_samples as fx

    inside = MabillonSettings(sandbox=SandboxSettings(enabled=False))
    child = MabillonSettings()
    text = ("Le conseil municipal délibère sur l'entretien du chemin vicinal. " * 20).encode()
    files = {"text (1.3 kB)": (text, "t.txt", "text/plain", args.files),
             "digital PDF, 2 pages": (fx.two_page_digital_pdf(), "d.pdf", "application/pdf", args.files),
             "scan, 1 page (OCR)": (fx.straight_scan("PNG"), "s.png", "image/png", args.scans)}
    load = os.getloadavg()
    started = time.perf_counter()
    sandbox.parse_untrusted(text, fx.revision_for("warm.txt", text, "text/plain"), child)
    start_s = time.perf_counter() - started
    rows = {}
    for label, (data, name, media_type, repeats) in files.items():
        rev = fx.revision_for(name, data, media_type)
        parse_revision(data, rev, inside)  # warm both sides (docling, tesseract caches)
        sandbox.parse_untrusted(data, rev, child)
        a = timed(lambda: parse_revision(data, rev, inside), repeats)
        b = timed(lambda: sandbox.parse_untrusted(data, rev, child), repeats)
        rows[label] = {"bytes": len(data), "repeats": repeats,
                       "in_process_ms": round(statistics.median(a) * 1000, 2),
                       "sandbox_ms": round(statistics.median(b) * 1000, 2),
                       "added_ms": round((statistics.median(b) - statistics.median(a)) * 1000, 2)}
    sandbox._POOL.shutdown()
    return {"machine": f"{platform.machine()}, {os.cpu_count()} cores", "load_before": [round(x, 2) for x in load],
            "child_start_s": round(start_s, 2), "files": rows}


def write_section(report: dict, path: Path) -> None:
    lines = [SECTION, "", f"`{' '.join(sys.argv)}` on {report['machine']}, load average before "
             f"{report['load_before']}. Medians; both sides in the same run.", "",
             f"Starting a child (paid once per child, reused for up to `sandbox.recycle_after` files, "
             f"and again after a crash): **{report['child_start_s']} s** — loading the parsers.", "",
             "| file | in process | in the sandbox | added per file |", "|---|---|---|---|"]
    for label, row in report["files"].items():
        lines.append(f"| {label} | {row['in_process_ms']} ms | {row['sandbox_ms']} ms | {row['added_ms']} ms |")
    lines += ["", "The added cost is sending the bytes to the child and the parsed pages back through "
              "a pipe (pickle), and resetting the limits; it does not grow with the work the parser does.", ""]
    replace_section(path, SECTION, "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--scans", type=int, default=5)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    report = run(args)
    save_report("sandbox", report)
    if args.write:
        write_section(report, args.write)


if __name__ == "__main__":
    main()
