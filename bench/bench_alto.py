"""ALTO at newspaper scale (issue 33, item 7): parsing and chunking pages/s on one core.

    flock -x /tmp/mabillon-cpu.lock .venv/bin/python bench/bench_alto.py \
        [--pages 300] [--repeats 5] [--parser module:function ...]

Input: every ALTO file of the shared BnF samples (../shared/newspapers: the Europeana
Newspapers packages' `ALTO/*.xml` and the Gallica package's `ocr/X*.xml[.gz]`), read once into
memory and cycled to `--pages` pages (each file is one page). "parse" is each parser named by
`--parser` (`module:function`, called as `f(data, revision, ParseSettings)`), on bytes already in
memory (no disk, no sandbox), the parsers taking turns within each repeat; the first is the
baseline every ratio divides by. By default: the tree parser the ingest used before
(tests/ingest/alto_reference.py), the streaming parser it uses now (tasks/ingest/parse/alto.py),
and the issue-package reader (`package_reader` below: alto_stream, blocks in pixels, no
ParsedDocument). "chunk" is `chunk_document` with the MiniLM tokenizer and the 200-token target a
release uses, on the documents of the first parser after the baseline that returns them; the
tokenizer's word counts are cached (tasks/token_counts.py), and since the pages cycle, "chunk"
finds them all counted after the warm-up: "chunk, cold" forgets them before every page (each page
as the first of its words, the worst case; a collection's pages are between the two). One
thread, one process: the figure is per core, in wall seconds and in the process's CPU seconds
(the per-core cost on a shared machine). Median and spread of `--repeats`; ratios are the median
of each repeat's own ratio.
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

from schemas.lineage import ParsedDocument  # noqa: E402
from schemas.settings import EmbeddingSettings, ParseSettings  # noqa: E402
from tasks.ingest.package.alto_stream import read_alto_page  # noqa: E402
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


def package_reader(data: bytes, revision, settings):
    """The issue-package path's reader (read_alto_page) in the parsers' calling shape."""
    return read_alto_page(data, max_bytes=settings.limits.max_bytes)


PARSERS = ["tests.ingest.alto_reference:parse_alto", "tasks.ingest.parse.alto:parse_alto",
           "bench.bench_alto:package_reader"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--parser", action="append", help="module:function of an ALTO parser to measure "
                        f"(repeat it; the first is the baseline; default {' '.join(PARSERS)})")
    args = parser.parse_args()
    specs = args.parser or PARSERS
    load_before = os.getloadavg()
    pages = alto_pages()
    if not pages:
        raise SystemExit(f"no ALTO pages under {NEWSPAPERS}")
    parsers = {spec: parser_of(spec) for spec in specs}
    settings = ParseSettings()
    work = [(revision_for(f"{i}-{name}", data, "application/xml"), data)
            for i, (name, data) in enumerate(itertools.islice(itertools.cycle(pages), args.pages))]
    embedder = load_embedder(EmbeddingSettings(threads=1))
    spec = chunk_spec(embedder.count_tokens, 200, embedder.space.max_input_tokens, embedder.space.space_id[:8])
    outputs = {s: [parse(data, rev, settings) for rev, data in work] for s, parse in parsers.items()}  # warm-up
    chunked = next((s for s in specs[1:] + specs[:1] if isinstance(outputs[s][0], ParsedDocument)), None)
    if chunked is None:
        raise SystemExit("no parser returns ParsedDocuments to chunk")
    docs = outputs[chunked]
    del outputs  # only the chunker's input stays: the others' pages would only grow the heap the GC scans
    chunk_document(docs[0], work[0][0].doc_id, spec, embedder.count_tokens)
    # wall seconds, and this process's CPU seconds: on a shared machine the CPU time is the
    # per-core cost of a page whatever else runs (wall = CPU on a quiet core)
    forget = getattr(embedder, "forget_word_counts", lambda: None)

    def chunk_cold(doc, doc_id):
        forget()
        return chunk_document(doc, doc_id, spec, embedder.count_tokens)

    steps_chunk = ["chunk", "chunk, cold"]
    wall = {s: [] for s in [*specs, *steps_chunk]}
    cpu = {s: [] for s in [*specs, *steps_chunk]}
    chunks = 0
    for _ in range(args.repeats):
        for s, parse in parsers.items():
            start, cpu_start = time.perf_counter(), time.process_time()
            for rev, data in work:
                parse(data, rev, settings)
            wall[s].append(time.perf_counter() - start)
            cpu[s].append(time.process_time() - cpu_start)
        start, cpu_start = time.perf_counter(), time.process_time()
        chunks = sum(len(chunk_document(d, rev.doc_id, spec, embedder.count_tokens))
                     for d, (rev, _) in zip(docs, work))
        wall["chunk"].append(time.perf_counter() - start)
        cpu["chunk"].append(time.process_time() - cpu_start)
        start, cpu_start = time.perf_counter(), time.process_time()
        cold = sum(len(chunk_cold(d, rev.doc_id)) for d, (rev, _) in zip(docs, work))
        wall["chunk, cold"].append(time.perf_counter() - start)
        cpu["chunk, cold"].append(time.process_time() - cpu_start)
        if cold != chunks:
            raise SystemExit(f"{cold} chunks with the word counts forgotten, {chunks} with them kept")
    words = sum(len(p.raw_text.split()) for d in docs for p in d.pages)
    rate = lambda secs: sorted(args.pages / x for x in secs)  # noqa: E731
    paired = lambda a, b: statistics.median(y / x for x, y in zip(cpu[a], cpu[b]))  # noqa: E731  rate a / rate b
    steps = {}
    for s in [*specs, *steps_chunk]:
        steps[s] = {"pages_per_s": statistics.median(rate(wall[s])), "pages_per_s_all": rate(wall[s]),
                    "pages_per_cpu_s": statistics.median(rate(cpu[s])), "pages_per_cpu_s_all": rate(cpu[s]),
                    "cpu_s_per_page": statistics.median(cpu[s]) / args.pages,
                    "vs_baseline_cpu": paired(s, specs[0])}
    report = {"cpus": os.cpu_count(), "parsers": specs, "baseline": specs[0], "chunked": chunked,
              "distinct_files": len(pages), "pages": args.pages, "words_per_page": words / args.pages,
              "chunks": chunks, "chunks_per_page": chunks / args.pages, "repeats": args.repeats, "steps": steps,
              "chunk_vs_its_parser_cpu": paired("chunk", chunked),
              "chunk_cold_vs_its_parser_cpu": paired("chunk, cold", chunked),
              "load_average_before": load_before, "load_average_after": os.getloadavg()}
    save_report("alto", report)
    print(f"| step (one thread) | pages/s wall (median of {args.repeats}) | min–max | pages per CPU-second "
          "| min–max | vs baseline (CPU) | pages/hour per core (CPU) |\n|---|---:|---:|---:|---:|---:|---:|",
          file=sys.stderr)
    for s, step in steps.items():
        r, c = step["pages_per_s_all"], step["pages_per_cpu_s_all"]
        print(f"| {s} | {step['pages_per_s']:.1f} | {r[0]:.1f}–{r[-1]:.1f} | {step['pages_per_cpu_s']:.1f} | "
              f"{c[0]:.1f}–{c[-1]:.1f} | {step['vs_baseline_cpu']:.2f}× | {step['pages_per_cpu_s'] * 3600:,.0f} |",
              file=sys.stderr)
    print(f"chunk / {chunked} (CPU, paired): {report['chunk_vs_its_parser_cpu']:.2f}×, cold "
          f"{report['chunk_cold_vs_its_parser_cpu']:.2f}×; load average "
          f"{load_before[0]:.1f} → {report['load_average_after'][0]:.1f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
