"""Ingest benchmarks (issue 2): embedding throughput per candidate model, first ingest vs
unchanged re-ingest of the full shared corpus, and peak memory.

    .venv/bin/python bench/bench_ingest.py [--corpus PATH] [--repeats 3] [--sample 300]

Each ingest runs in its own process so peak RSS is per run; figures are medians, and speed is
reported as ratios against a baseline measured in the same run. Results: JSON on stdout and
bench/results/ingest.json; copy the table into docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import save_report  # noqa: E402
DEFAULT_CORPUS = ROOT.parent / "shared" / "histqa1887" / "corpus.jsonl"


def worker_ingest(corpus: str, home: str) -> dict:
    from flows.release import release
    from schemas.settings import MabillonSettings

    t0 = time.perf_counter()
    result = release(paths=[corpus], settings=MabillonSettings(home=Path(home)))
    flow_s = time.perf_counter() - t0
    return {"flow_s": flow_s, "published": result.published, "chunks": result.counts.chunks,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def worker_embed(corpus: str, model: str, sample: int, repeats: int) -> dict:
    from schemas.lineage import ParsedDocument, ParsedPage
    from schemas.settings import EmbeddingSettings
    from tasks.ingest.chunk import chunk_document, chunk_spec
    from tasks.embedding import load_embedder

    embedder = load_embedder(EmbeddingSettings(model=model))
    plan = chunk_spec(embedder.count_tokens, 200, embedder.space.max_input_tokens, "bench")
    texts: list[str] = []
    for line in open(corpus, encoding="utf-8"):
        rec = json.loads(line)
        doc = ParsedDocument(revision_id="r", pages=[ParsedPage(page_no=1, raw_text=rec["text"],
                             normalized_text="", parser="b", parser_version="1")])
        texts += [c.text for c in chunk_document(doc, rec["doc_id"], plan, embedder.count_tokens)]
        if len(texts) >= sample:
            break
    texts = texts[:sample]
    embedder.embed_documents(texts[:16])  # warm-up
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        embedder.embed_documents(texts)
        rates.append(len(texts) / (time.perf_counter() - t0))
    return {"model": model, "space": embedder.space.model_name, "chunks": len(texts),
            "mean_tokens": sum(embedder.count_tokens(texts)) / len(texts),
            "chunks_per_s": statistics.median(rates), "runs": rates,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_worker(args: list[str], env: dict) -> tuple[dict, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sample", type=int, default=300)
    ap.add_argument("--worker", choices=["ingest", "embed"])
    ap.add_argument("--home")
    ap.add_argument("--model")
    a = ap.parse_args()
    if a.worker == "ingest":
        print(json.dumps(worker_ingest(a.corpus, a.home)))
        return
    if a.worker == "embed":
        print(json.dumps(worker_embed(a.corpus, a.model, a.sample, a.repeats)))
        return

    env = dict(os.environ, HF_HUB_OFFLINE="1", GX_ANALYTICS_ENABLED="false",
               PREFECT_HOME=tempfile.mkdtemp(prefix="bench-prefect-"), PREFECT_LOGGING_LEVEL="WARNING")
    report: dict = {"cpu_count": os.cpu_count(), "embedding": []}
    for model in ("minilm", "e5"):
        res, _ = run_worker(["--worker", "embed", "--model", model, "--corpus", a.corpus,
                             "--sample", str(a.sample), "--repeats", str(a.repeats)], env)
        report["embedding"].append(res)
        print(f"embed {model}: {res['chunks_per_s']:.1f} chunks/s", file=sys.stderr)
    base = report["embedding"][0]["chunks_per_s"]
    for r in report["embedding"]:
        r["ratio_vs_minilm"] = r["chunks_per_s"] / base

    home = tempfile.mkdtemp(prefix="bench-home-")
    first, first_wall = run_worker(["--worker", "ingest", "--corpus", a.corpus, "--home", home], env)
    print(f"first ingest: {first['flow_s']:.1f} s in the flow", file=sys.stderr)
    reruns = [run_worker(["--worker", "ingest", "--corpus", a.corpus, "--home", home], env)
              for _ in range(a.repeats)]
    assert not any(r["published"] for r, _ in reruns), "an unchanged re-ingest published something"
    rerun_flow = statistics.median(r["flow_s"] for r, _ in reruns)
    rerun_wall = statistics.median(w for _, w in reruns)
    report["home"] = home  # bench_ops.py can copy this state instead of re-ingesting
    report["ingest"] = {
        "chunks": first["chunks"], "first_flow_s": first["flow_s"], "first_process_s": first_wall,
        "rerun_flow_s_median": rerun_flow, "rerun_process_s_median": rerun_wall,
        "rerun_over_first_flow": rerun_flow / first["flow_s"],
        "rerun_over_first_process": rerun_wall / first_wall,
        "first_peak_rss_mb": first["peak_rss_mb"],
        "rerun_peak_rss_mb": statistics.median(r["peak_rss_mb"] for r, _ in reruns),
    }
    save_report("ingest", report)


if __name__ == "__main__":
    main()
