"""The query side at scale (issue 11): warm-start latency, ANN recall against exact search at
several filter selectivities, BM25 from disk against the in-memory channel, build times, disk
and the peak memory of a serving process, on synthetic generations of 100k and 1M chunks.

    .venv/bin/python bench/bench_scale.py --sizes 100000,1000000 --json
    # or in two phases (build under a shared CPU lock, timings under an exclusive one):
    .venv/bin/python bench/bench_scale.py --sizes 100000 --phase build --workdir /tmp/scale
    .venv/bin/python bench/bench_scale.py --sizes 100000 --phase measure --workdir /tmp/scale --json

How a generation is made: the shared corpus's published generation (`--base-home`, built with
`mabillon ingest` when missing) is copied until it has N chunks. Copy n of chunk c gets new ids
(`c~n`, document `d~n`), its text with OCR-like noise on a share of its words (letters confused
as OCR confuses them, accents dropped, letters lost or doubled), and its real MiniLM vector
plus Gaussian noise, renormalised: each real chunk becomes a cloud of near neighbours, so the
vector space keeps the corpus's own neighbourhoods. Each copied document is put in groups so
that principals see 100 %, 10 % and 1 % of the rows. The generation is written by the store's
own publish functions (Lance version + indexes + tag, manifest with its index contract,
routing switch). Queries are development questions, embedded by the real model at query time.

The measure phase runs in a child process (one per size) that serves warm starts for each
principal first: its peak RSS then is the serving figure; the baselines (exact dense search,
exhaustive BM25, the in-memory BM25 index) run after it is read. Results: JSON on stdout (`--json`) and bench/results/scale.json.

Before a size is measured, the parent reads its warehouse once (`page_cache` in the figures):
a server that has run a while finds its index files in the OS page cache, while a measure run
after the machine dropped them (a new session, another job) reads 3 GB from disk during its
questions: at 1M and 100 % a p50 of 62–116 ms instead of 40–48. `--cold` skips it, to measure
that case. The read fills the page cache, not the serving process's anonymous memory; the
mapped share of its RSS grows (docs/benchmarks.md, stop 29).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import CORPUS, DEV, offline_env, save_report  # noqa: E402

offline_env()

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

WARM_UP = 30  # questions a served process answered before the measured ones
SELECTIVITIES = {"all": 1.0, "g10": 0.10, "g1": 0.01}
CONFUSIONS = [("e", "c"), ("c", "e"), ("rn", "m"), ("m", "rn"), ("l", "1"), ("i", "l"), ("u", "n"),
              ("n", "u"), ("é", "e"), ("è", "e"), ("à", "a"), ("a", "o"), ("s", "f"), ("h", "b")]


def ocr_noise(text: str, rng: np.random.Generator, rate: float) -> str:
    """A share `rate` of the words garbled the way OCR garbles them."""
    words = text.split(" ")
    n = len(words)
    for i in np.flatnonzero(rng.random(n) < rate).tolist():
        w = words[i]
        if len(w) < 2:
            continue
        op = int(rng.integers(3))
        if op == 0:
            src, dst = CONFUSIONS[int(rng.integers(len(CONFUSIONS)))]
            w = w.replace(src, dst, 1) if src in w else w[:-1]
        elif op == 1:
            j = int(rng.integers(len(w)))
            w = w[:j] + w[j + 1:]
        else:
            j = int(rng.integers(len(w)))
            w = w[:j] + w[j] + w[j:]
        words[i] = w
    return " ".join(words)


def base_generation(base_home: Path) -> pa.Table:
    """The shared corpus published once (the real pipeline), read back as its Lance rows."""
    from schemas.settings import MabillonSettings
    from tasks.store.lance_store import open_generation_table
    from tasks.store.layout import StoreLayout
    from tasks.store.routing import read_routing

    settings = MabillonSettings(home=base_home)
    layout = StoreLayout.from_settings(settings)
    if read_routing(layout).serving is None:
        subprocess.run([str(ROOT / ".venv" / "bin" / "mabillon"), "ingest", str(CORPUS), "--home",
                        str(base_home)], check=True)
    serving = read_routing(layout).serving
    return open_generation_table(layout, serving).to_arrow(), serving


def group_of(doc_index: np.ndarray) -> list[list[str]]:
    """Every copied document is in `all`; 10 % also in `g10`, 1 % (a part of those) in `g1`."""
    h = (doc_index * 2654435761) % 1000
    return [["all", "g10", "g1"] if x < 10 else ["all", "g10"] if x < 100 else ["all"] for x in h.tolist()]


def synthetic_batches(base: pa.Table, size: int, seed: int, text_noise: float, vector_noise: float,
                      schema: pa.Schema, batch_rows: int = 20_000):
    """Record batches of `size` rows: copies of the base rows, noised (see the module doc)."""
    rng = np.random.default_rng(seed)
    b = base.num_rows
    texts = base.column("text").to_pylist()
    vectors = np.asarray(base.column("vector").combine_chunks().values.to_numpy(), np.float32).reshape(b, -1)
    doc_codes = np.unique(np.asarray(base.column("doc_id").to_pylist(), object), return_inverse=True)[1]
    n_docs = int(doc_codes.max()) + 1
    # Every other column (validity, spans, ...) is copied from the base row, whatever the schema holds.
    made = {"text", "tenant", "groups", "vector"}
    cols = {f.name: base.column(f.name).to_pylist() for f in schema if f.name not in made}
    for start in range(0, size, batch_rows):
        rows = np.arange(start, min(size, start + batch_rows))
        src, copy = rows % b, rows // b
        vec = vectors[src] + (rng.normal(0, vector_noise, (rows.size, vectors.shape[1])).astype(np.float32)
                              * (copy > 0)[:, None])
        vec /= np.linalg.norm(vec, axis=1, keepdims=True)
        data = {name: [values[s] for s in src.tolist()] for name, values in cols.items()}
        for key in ("chunk_id", "revision_id", "source_id", "doc_id"):
            data[key] = [f"{v}~{c}" for v, c in zip(data[key], copy.tolist())]
        data["text"] = [texts[s] if c == 0 else ocr_noise(texts[s], rng, text_noise)
                        for s, c in zip(src.tolist(), copy.tolist())]
        data["tenant"] = ["bench"] * rows.size
        data["groups"] = group_of(copy * n_docs + doc_codes[src])
        data["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1), pa.float32()), vec.shape[1])
        yield pa.RecordBatch.from_pydict({f.name: data[f.name] for f in schema}, schema=schema)


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build(size: int, workdir: Path, base_home: Path, args) -> dict:
    """Publish a synthetic generation of `size` chunks through the store's functions."""
    from schemas.generation import Counts, DiffSummary, GenerationManifest, RunCounts
    from schemas.indexes import IndexSettings
    from schemas.lineage import chunk_table_schema
    from schemas.settings import MabillonSettings
    from tasks.index.generation_indexes import LEXICAL_COLUMNS, index_generation
    from tasks.store.lance_store import write_generation_table
    from tasks.store.layout import StoreLayout
    from tasks.store.manifests import read_manifest, write_manifest
    from tasks.store.routing import switch_routing

    base, base_gen = base_generation(base_home)
    base_manifest = read_manifest(StoreLayout.from_settings(MabillonSettings(home=base_home)), base_gen)
    home = workdir / f"n{size}"
    shutil.rmtree(home, ignore_errors=True)
    settings = MabillonSettings(home=home, index=IndexSettings(ann_min_rows=args.ann_min_rows,
                                                               ann_type=args.ann_type))
    layout = StoreLayout.from_settings(settings).ensure()
    schema = chunk_table_schema(base_manifest.embedding_space.dim)
    kept: list[pa.Table] = []

    def batches():
        for batch in synthetic_batches(base, size, args.seed, args.text_noise, args.vector_noise, schema):
            kept.append(pa.Table.from_batches([batch]).select(LEXICAL_COLUMNS))
            yield batch

    built = {}

    def prepare(lance_table) -> None:
        built["write_s"] = round(time.perf_counter() - started, 1)
        built["contract"] = index_generation(lance_table, pa.concat_tables(kept), layout.index_dir("g0001"),
                                             settings.index, settings.retrieval)

    started = time.perf_counter()
    version = write_generation_table(layout, "g0001", pa.RecordBatchReader.from_batches(schema, batches()),
                                     prepare)
    contract = built["contract"]
    write_manifest(layout, GenerationManifest(
        generation="g0001", created_at=datetime.now(timezone.utc), parent=None,
        embedding_space=base_manifest.embedding_space, space_id=base_manifest.space_id,
        embedding_model=base_manifest.embedding_model, lance_table="chunks", lance_version=version,
        lance_tag="g0001", lineage_dir=str(layout.lineage_dir("g0001")), counts=Counts(chunks=size, vectors=size),
        digest="synthetic", diff=DiffSummary(), run=RunCounts(), segmenter=base_manifest.segmenter,
        indexes=contract))
    switch_routing(layout, "g0001", base_manifest.space_id, "publish", "bench_scale")
    # The query encoder a real release compiles for its space (tasks/compiled_encoder.py) comes
    # with the home it serves from: served questions are embedded by it, not by torch.
    base_encoders = StoreLayout.from_settings(MabillonSettings(home=base_home)).encoders
    if Path(str(base_encoders)).is_dir():
        shutil.copytree(str(base_encoders), str(layout.encoders), dirs_exist_ok=True)
    lance_dir = home / "warehouse" / "lance"
    indices = lance_dir / "chunks.lance" / "_indices"
    total_index = folder_bytes(indices)
    return {"size": size, "home": str(home), "write_s": built["write_s"],
            "ann_build_s": contract.dense.build_s, "ann": contract.dense.model_dump(),
            "lexical_build_s": contract.lexical.build_s, "lexical_terms": contract.lexical.terms,
            "lexical_postings": contract.lexical.postings,
            "total_build_s": round(time.perf_counter() - started, 1),
            "disk_bytes": {"lance_data": folder_bytes(lance_dir) - total_index,
                           "lance_indexes": total_index,
                           "lexical": folder_bytes(home / "warehouse" / "indexes")},
            "manifest_bytes": layout.manifest_path("g0001").stat().st_size}


def questions(n: int) -> list[str]:
    rows = [json.loads(line)["question"] for line in DEV.open(encoding="utf-8")]
    rng = np.random.default_rng(11)
    return [rows[i] for i in rng.choice(len(rows), size=min(n, len(rows)), replace=False)]


def measure(home: Path, n_questions: int, overlap: bool) -> dict:
    """Serve only (this is the process whose peak RSS is reported)."""
    from schemas.retrieval import Principal
    from schemas.settings import MabillonSettings
    from tasks.query.analysis import question_query
    from tasks.index.dense_search import DensePlan
    from tasks.query.retriever import Retriever

    # one thread for the query encoder on a shared 2-core machine (docs/benchmarks.md); the
    # compiled encoder the home holds, so torch is not loaded (nor counted in the RSS)
    os.environ["MABILLON_EMBEDDING__THREADS"] = "1"
    settings = MabillonSettings(home=home)
    qs = questions(n_questions)
    # other development questions to warm up on: a process that has served a while holds the
    # index partitions and hot postings in its caches, but not the answers to these questions
    warm_up = [q for q in questions(n_questions + WARM_UP) if q not in qs][:WARM_UP]
    out = {"questions": len(qs), "selectivities": []}
    t0 = time.perf_counter()
    first = Retriever.open(settings, Principal(principal_id="p-all", tenant="bench", groups=["all"]))
    out["open_s"] = round(time.perf_counter() - t0, 2)
    for q in warm_up:  # model, compiled scoring, LanceDB's index cache, the hot postings
        first.warm_start(q, k=10)
    served = {}
    for group in SELECTIVITIES:  # what a serving process does: warm starts, nothing else
        r = Retriever.open(settings, Principal(principal_id=f"p-{group}", tenant="bench", groups=[group]))
        latencies = []
        for q in qs:
            r.search._qvecs.clear()  # the query embedding is part of every warm start measured
            t = time.perf_counter()
            r.warm_start(q, k=10)
            latencies.append((time.perf_counter() - t) * 1000)
        served[group] = r, latencies
    # the serving peak, read before the comparisons below (exact search of every allowed vector
    # and exhaustive BM25 are the baselines, not what a serving process runs)
    out["rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    # of which, now: anonymous memory, and pages of mapped index files (the page cache's, shared
    # and evictable: the posting lists the queries touched)
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    out["rss_anon_mb"], out["rss_file_mb"] = (round(int(status[k].split()[0]) / 1024, 1)
                                              for k in ("RssAnon", "RssFile"))
    out["query_encoder"] = type(first.search.embed_queries.__self__).__name__
    for group, share in SELECTIVITIES.items():
        r, latencies = served[group]
        ann_ms, exact_ms, recalls = [], [], []
        exact = Retriever(generation=r.generation, space_id=r.space_id, view=r.view, lance_table=r.search.lance,
                          embed_queries=r.search.embed_queries, principal=r.principal, retrieval=r.params,
                          index_dir=r.search.index_dir, dense_plan=DensePlan(), contract=r.search.contract)
        # the index itself, even where the plan searches few allowed rows exactly
        forced = Retriever(generation=r.generation, space_id=r.space_id, view=r.view, lance_table=r.search.lance,
                           embed_queries=r.search.embed_queries, principal=r.principal, retrieval=r.params,
                           index_dir=r.search.index_dir, contract=r.search.contract,
                           dense_plan=DensePlan(ann=r.dense_plan.ann, nprobes=r.dense_plan.nprobes,
                                                refine_factor=r.dense_plan.refine_factor,
                                                refine_rows=r.dense_plan.refine_rows,
                                                partitions=r.dense_plan.partitions,
                                                rows=r.dense_plan.rows))
        forced_recalls, walk_ms, full_ms = [], [], []
        for q in qs:
            # the lexical channel alone: the bounded walk against scoring every posting
            query = question_query(q, tuple(r.corpora()), r.params.stem)
            t = time.perf_counter()
            r.bm25_top(query, r.allowed, 50)
            walk_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            r.bm25_scores(query)
            full_ms.append((time.perf_counter() - t) * 1000)
            r.query_vector(q)
            t = time.perf_counter()
            got = [h.chunk_id for h in r.dense_chunks(q, k=10)]
            ann_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            truth = [h.chunk_id for h in exact.dense_chunks(q, k=10)]
            exact_ms.append((time.perf_counter() - t) * 1000)
            recalls.append(len(set(got) & set(truth)) / max(1, len(truth)))
            index_only = [h.chunk_id for h in forced.dense_chunks(q, k=10)]
            forced_recalls.append(len(set(index_only) & set(truth)) / max(1, len(truth)))
        out["selectivities"].append({
            "principal_groups": [group], "selectivity": share,
            "allowed_rows": int(r.allowed.sum()), "allowed_share": round(float(r.allowed.mean()), 4),
            "ann_used": r.dense_plan.use_index(int(r.allowed.sum())),
            "probes": r.dense_plan.probes_for(int(r.allowed.sum())) if r.dense_plan.ann else None,
            "p50_ms": round(statistics.median(latencies), 1),
            "p95_ms": round(float(np.percentile(latencies, 95)), 1),
            "ann_recall_at_10": round(float(np.mean(recalls)), 4),
            "index_only_recall_at_10": round(float(np.mean(forced_recalls)), 4),
            "dense_top10_ms_p50": {"index": round(statistics.median(ann_ms), 1),
                                   "exact": round(statistics.median(exact_ms), 1)},
            "bm25_top50_ms_p50": {"bounded": round(statistics.median(walk_ms), 1),
                                  "exhaustive": round(statistics.median(full_ms), 1)}})
    if overlap:
        out["bm25_overlap_at_10"] = bm25_overlap(first, qs)
    return out


def bm25_overlap(r, qs: list[str]) -> float:
    """Top-10 chunks of the served on-disk channel (its bounded walk) against the in-memory one
    (`Bm25Index`, every posting scored) for the same principal (run after the RSS reading: the in-memory index is what does not scale)."""
    from tasks.index.analyzer import analyze
    from tasks.query.analysis import question_query
    from tests.query.reference_bm25 import Bm25Index
    from tasks.query.searchable import texts
    from tasks.query.view import best_rows, top_rows

    view = r.view
    ref = Bm25Index.build(list(texts(view)), view.chunk_ids.to_pylist(), r.params.stem, r.params.char_ngrams)
    mask, shares = r.allowed, []
    for q in qs:
        query = question_query(q, tuple(r.corpora()), r.params.stem)
        terms = analyze(query, r.params.stem, r.params.char_ngrams)
        # the served path: the bounded walk over the on-disk postings (`bm25_top`)
        disk = set(best_rows(*r.bm25_top(query, mask, 10), 10)[0].tolist())
        mem = set(top_rows(ref.scores(terms, mask, r.params.bm25_k1, r.params.bm25_b), mask, 10)[0].tolist())
        shares.append(len(disk & mem) / max(1, len(mem)))
    return round(float(np.mean(shares)), 4)


def prime_page_cache(home: Path) -> dict:
    """Read every file of the home's warehouse once, so that its pages are in the OS cache
    (what serving for a while does); the time says whether they were (GB/s) or not (disk)."""
    t0, total = time.perf_counter(), 0
    for path in sorted((home / "warehouse").rglob("*")):
        if path.is_file():
            with path.open("rb", buffering=0) as f:
                while chunk := f.read(8 << 20):
                    total += len(chunk)
    seconds = time.perf_counter() - t0
    return {"primed": True, "read_mb": round(total / 2**20, 1), "read_s": round(seconds, 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100000,1000000", help="comma-separated chunk counts")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    p.add_argument("--phase", choices=["all", "build", "measure"], default="all")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/mabillon-bench-scale"))
    p.add_argument("--base-home", type=Path, default=None, help="a home serving the shared corpus")
    p.add_argument("--questions", type=int, default=50)
    p.add_argument("--ann-type", default="IVF_RQ", choices=["IVF_RQ", "IVF_SQ", "IVF_PQ", "IVF_HNSW_SQ"])
    p.add_argument("--ann-min-rows", type=int, default=0, help="index threshold (0: ANN at every size)")
    p.add_argument("--text-noise", type=float, default=0.04, help="share of words garbled per copy")
    p.add_argument("--vector-noise", type=float, default=0.03, help="Gaussian sigma per dimension")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--keep", action="store_true", help="keep the generations after measuring")
    p.add_argument("--cold", action="store_true",
                   help="measure without reading the warehouse into the page cache first")
    p.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # child: measure one home
    p.add_argument("--overlap", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        print(json.dumps(measure(args.serve, args.questions, args.overlap)))
        return
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.workdir.mkdir(parents=True, exist_ok=True)
    base_home = args.base_home or args.workdir / "base"
    report = {"command": " ".join(sys.argv), "load_average_before": os.getloadavg(),
              "cpus": os.cpu_count(), "settings": {k: getattr(args, k) for k in
                                                   ("ann_type", "text_noise", "vector_noise", "questions")},
              "sizes": []}
    builds_path = args.workdir / "builds.json"
    builds = json.loads(builds_path.read_text()) if builds_path.exists() else {}
    for size in sizes:
        if args.phase in ("all", "build"):
            builds[str(size)] = build(size, args.workdir, base_home, args)
            builds_path.write_text(json.dumps(builds, indent=2))
        if args.phase in ("all", "measure"):
            info = builds[str(size)]
            cache = {"primed": False} if args.cold else prime_page_cache(Path(info["home"]))
            child = subprocess.run([sys.executable, __file__, "--serve", info["home"], "--questions",
                                    str(args.questions), *(["--overlap"] if size <= 100_000 else [])],
                                   capture_output=True, text=True, check=False)
            if child.returncode != 0:
                raise SystemExit(child.stderr[-3000:])
            served = json.loads(child.stdout.strip().splitlines()[-1])
            per_million = {k: round(v / size * 1e6 / 2**20, 1) for k, v in info["disk_bytes"].items()}
            report["sizes"].append({**{k: v for k, v in info.items() if k != "home"}, **served,
                                    "page_cache": cache, "disk_mb_per_million_chunks": per_million})
            if not args.keep:
                shutil.rmtree(info["home"], ignore_errors=True)
    report["load_average_after"] = os.getloadavg()
    if args.phase != "build":
        save_report("scale", report)  # bench/results/scale.json, and the same JSON on stdout


if __name__ == "__main__":
    main()
