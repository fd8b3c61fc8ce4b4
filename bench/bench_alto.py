"""ALTO at newspaper scale (issue 33, item 7): parsing and chunking pages/s on one core.

    flock -x /tmp/mabillon-cpu.lock .venv/bin/python bench/bench_alto.py \
        [--pages 300] [--repeats 5] [--parser tasks.ingest.parse.alto:parse_alto]

Input: every ALTO file of the shared BnF samples (../shared/newspapers: the Europeana
Newspapers packages' `ALTO/*.xml` and the Gallica package's `ocr/X*.xml[.gz]`), read once into
memory and cycled to `--pages` pages (each file is one page). "parse" is the parser function
named by `--parser` (`module:function`, called as `f(data, revision, ParseSettings)` and
returning a ParsedDocument, as every parser of tasks/ingest/parse is), on bytes already in
memory (no disk, no sandbox); "chunk" is `chunk_document` with the MiniLM tokenizer and the
200-token target a release uses, on the parsed documents. One thread, one process: the figure
is per core, in wall seconds and in the process's CPU seconds (the per-core cost on a shared
machine). Both run `--repeats` times, alternating; median and spread.
Results: JSON on stdout and bench/results/alto.json, a Markdown table on stderr.
"""
from __future__ import annotations

import argparse
import gzip
import importlib
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import offline_env, save_report  # noqa: E402

offline_env()
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one thread: the figure is per core

from schemas.settings import EmbeddingSettings, ParseSettings  # noqa: E402
from tasks.embedding import load_embedder  # noqa: E402
from tasks.ingest.chunk import chunk_document, chunk_spec  # noqa: E402
from tests.fixtures.make_samples import revision_for  # noqa: E402

NEWSPAPERS = ROOT.parent / "shared" / "newspapers"


def alto_pages() -> list[tuple[str, bytes]]:
    """(name, ALTO bytes) of every ALTO page of the shared samples, gunzipped."""
    files = sorted(NEWSPAPERS.glob("europeana-bnf/*/*/ALTO/*.xml")) + \
        sorted(NEWSPAPERS.glob("gallica/*/*/ocr/X*.xml*"))
    out = []
    for f in files:
        data = f.read_bytes()
        out.append((f.name.removesuffix(".gz"), gzip.decompress(data) if f.suffix == ".gz" else data))
    return out


def parser_of(spec: str):
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--parser", default="tasks.ingest.parse.alto:parse_alto",
                        help="module:function of the ALTO parser to measure")
    args = parser.parse_args()
    load_before = os.getloadavg()
    pages = alto_pages()
    if not pages:
        raise SystemExit(f"no ALTO pages under {NEWSPAPERS}")
    parse = parser_of(args.parser)
    settings = ParseSettings()
    work = [(revision_for(f"{i}-{name}", data, "application/xml"), data)
            for i, (name, data) in enumerate(itertools.islice(itertools.cycle(pages), args.pages))]
    embedder = load_embedder(EmbeddingSettings(threads=1))
    spec = chunk_spec(embedder.count_tokens, 200, embedder.space.max_input_tokens, embedder.space.space_id[:8])
    docs = [parse(data, rev, settings) for rev, data in work]  # warm-up, and the chunker's input
    chunk_document(docs[0], work[0][0].doc_id, spec, embedder.count_tokens)
    # wall seconds, and this process's CPU seconds: on a shared machine the CPU time is the
    # per-core cost of a page whatever else runs (wall = CPU on a quiet core)
    parse_s, chunk_s, parse_cpu, chunk_cpu, chunks = [], [], [], [], 0
    for _ in range(args.repeats):
        start, cpu = time.perf_counter(), time.process_time()
        docs = [parse(data, rev, settings) for rev, data in work]
        parse_s.append(time.perf_counter() - start)
        parse_cpu.append(time.process_time() - cpu)
        start, cpu = time.perf_counter(), time.process_time()
        chunks = sum(len(chunk_document(d, rev.doc_id, spec, embedder.count_tokens))
                     for d, (rev, _) in zip(docs, work))
        chunk_s.append(time.perf_counter() - start)
        chunk_cpu.append(time.process_time() - cpu)
    words = sum(len(p.raw_text.split()) for d in docs for p in d.pages)
    rate = lambda secs: sorted(args.pages / s for s in secs)  # noqa: E731
    report = {"cpus": os.cpu_count(), "parser": args.parser, "distinct_files": len(pages),
              "pages": args.pages, "words_per_page": words / args.pages, "chunks": chunks,
              "chunks_per_page": chunks / args.pages, "repeats": args.repeats,
              "parse_pages_per_s": statistics.median(rate(parse_s)), "parse_pages_per_s_all": rate(parse_s),
              "chunk_pages_per_s": statistics.median(rate(chunk_s)), "chunk_pages_per_s_all": rate(chunk_s),
              "parse_pages_per_cpu_s": statistics.median(rate(parse_cpu)),
              "parse_pages_per_cpu_s_all": rate(parse_cpu),
              "chunk_pages_per_cpu_s": statistics.median(rate(chunk_cpu)),
              "chunk_pages_per_cpu_s_all": rate(chunk_cpu),
              "load_average_before": load_before, "load_average_after": os.getloadavg()}
    save_report("alto", report)
    print(f"| step (one thread) | pages/s wall (median of {args.repeats}) | min–max | pages per CPU-second "
          "| min–max | pages/hour per core (CPU) |\n|---|---:|---:|---:|---:|---:|", file=sys.stderr)
    for step in ("parse", "chunk"):
        r, c = report[f"{step}_pages_per_s_all"], report[f"{step}_pages_per_cpu_s_all"]
        print(f"| {step} | {statistics.median(r):.1f} | {r[0]:.1f}–{r[-1]:.1f} | {statistics.median(c):.1f} | "
              f"{c[0]:.1f}–{c[-1]:.1f} | {statistics.median(c) * 3600:,.0f} |", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
