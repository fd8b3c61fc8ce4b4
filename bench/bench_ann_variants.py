"""Which LanceDB vector index to publish (issue 11): recall@10 against exact search under the
access prefilter at 100 %, 10 % and 1 % selectivity, query latency and build time, per index
type and query parameters, on the synthetic vectors of bench_scale.py.

    .venv/bin/python bench/bench_ann_variants.py --size 100000 --base-home /tmp/base \
        --variants exact,sq,flat,pq48,hnswsq

Only the vectors and groups are written (no texts, no lexical index), so it measures the
dense channel alone; the truth is a numpy scan of every allowed vector. Results: JSON lines on
stdout and bench/results/ann_variants.json.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import offline_env, save_report  # noqa: E402

offline_env()

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from bench.bench_scale import SELECTIVITIES, base_generation, questions, synthetic_batches  # noqa: E402


def variants(rows: int) -> dict:
    """name -> (index config or None for exact, [query parameters])."""
    from lancedb.index import IvfFlat, IvfHnswSq, IvfPq, IvfSq

    p = max(1, round(rows ** 0.5))
    return {
        "exact": (None, [{}]),
        "sq": (IvfSq(distance_type="cosine", num_partitions=p),
               [{"nprobes": 24}, {"nprobes": 24, "refine": 10}, {"nprobes": 48, "refine": 10}]),
        "flat": (IvfFlat(distance_type="cosine", num_partitions=p), [{"nprobes": 24}, {"nprobes": 48}]),
        "pq48": (IvfPq(distance_type="cosine", num_partitions=p, num_sub_vectors=48),
                 [{"nprobes": 24, "refine": 4}, {"nprobes": 24, "refine": 30}, {"nprobes": 48, "refine": 50}]),
        "hnswsq": (IvfHnswSq(distance_type="cosine", num_partitions=max(1, p // 8)),
                   [{"nprobes": 8, "ef": 40}, {"nprobes": 8, "ef": 100, "refine": 5},
                    {"nprobes": 16, "ef": 200, "refine": 10}]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--base-home", type=Path, required=True, help="a home serving the shared corpus")
    ap.add_argument("--variants", default="exact,sq,flat,pq48,hnswsq")
    ap.add_argument("--questions", type=int, default=30)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/mabillon-bench-ann"))
    args = ap.parse_args()

    import lancedb
    import torch
    from lancedb.index import LabelList

    from schemas.settings import MabillonSettings
    from tasks.embedding import load_embedder

    torch.set_num_threads(1)
    base, _ = base_generation(args.base_home)
    table = pa.Table.from_batches(list(synthetic_batches(base, args.size, 7, 0.0, 0.03, base.schema)))
    table = table.select(["chunk_id", "groups", "vector"])
    vectors = np.asarray(table.column("vector").combine_chunks().values.to_numpy(), np.float32)
    vectors = vectors.reshape(args.size, -1)
    groups = table.column("groups").to_pylist()
    ids = np.array(table.column("chunk_id").to_pylist(), object)
    qs = questions(args.questions)
    qvecs = np.asarray(load_embedder(MabillonSettings(home=args.base_home).embedding).embed_queries(qs), np.float32)
    sims = qvecs @ vectors.T
    truth = {}
    for g in SELECTIVITIES:
        allowed = np.array([g in x for x in groups])
        truth[g] = [set(ids[np.argsort(-np.where(allowed, s, -9.0))[:10]]) for s in sims]
    lines = []
    for name in args.variants.split(","):
        config, searches = variants(args.size)[name]
        shutil.rmtree(args.workdir, ignore_errors=True)
        lt = lancedb.connect(str(args.workdir)).create_table("t", table)
        started = time.perf_counter()
        if config is not None:
            lt.create_index("vector", config=config, name="ann")
        build_s = time.perf_counter() - started
        lt.create_index("groups", config=LabelList(), name="groups_idx")
        for sp in searches:
            for g in SELECTIVITIES:
                recalls, ms = [], []
                for qv, true in zip(qvecs, truth[g]):
                    q = (lt.search(qv, vector_column_name="vector").metric("cosine")
                         .where(f"array_has_any(groups, ['{g}'])", prefilter=True)
                         .select(["chunk_id", "_distance"]).limit(10))
                    if config is None:
                        q = q.bypass_vector_index()
                    if "nprobes" in sp:
                        # no maximum_nprobes(0): LanceDB 0.40 then probes every partition
                        q = q.nprobes(sp["nprobes"])
                    if "refine" in sp:
                        q = q.refine_factor(sp["refine"])
                    if "ef" in sp:
                        q = q.ef(sp["ef"])
                    t = time.perf_counter()
                    got = set(q.to_arrow().column("chunk_id").to_pylist())
                    ms.append((time.perf_counter() - t) * 1000)
                    recalls.append(len(got & true) / 10)
                lines.append({"variant": name, "build_s": round(build_s, 1), **sp, "group": g,
                              "recall_at_10": round(float(np.mean(recalls)), 3),
                              "p50_ms": round(float(np.median(ms)), 1)})
                print(lines[-1], flush=True)
    shutil.rmtree(args.workdir, ignore_errors=True)
    save_report("ann_variants", {"command": " ".join(sys.argv), "size": args.size, "rows": lines})


if __name__ == "__main__":
    main()
