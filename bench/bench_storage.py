"""Warehouse on S3 vs on the local disk (issue 6), measured in the same run on the shared corpus.

    .venv/bin/python bench/bench_storage.py [--questions 60] [--deletions 3]

The S3 side is moto's server on loopback (the test extra): no network latency, but every
object goes through the S3 protocol over HTTP, so the figures show what the object-store code
path costs — they are a floor for MinIO or AWS, where each request adds a round trip.
Both sides run the same steps in the same process, after a warm-up release (model loaded,
Prefect's ephemeral API started):
first ingest, unchanged re-ingest, cold retriever open, warm-start queries, and deletions.
Results: JSON on stdout and bench/results/storage.json.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import CORPUS, DEV, offline_env, save_report  # noqa: E402

offline_env()
from tests.s3 import S3Bucket, start_s3_server, stop_s3_server  # noqa: E402  (moto, test extra)


def warm_up() -> None:
    """A tiny release in a throw-away home: the first flow of a process starts Prefect's
    ephemeral API, which must not be billed to whichever side runs first."""
    from flows.release import release
    from schemas.settings import MabillonSettings

    root = Path(tempfile.mkdtemp(prefix="bench-warmup-"))
    export = root / "three.jsonl"
    with CORPUS.open(encoding="utf-8") as fh:
        export.write_text("".join(next(fh) for _ in range(3)), "utf-8")
    release(paths=[str(export)], settings=MabillonSettings(home=root / "home"))
    shutil.rmtree(root, ignore_errors=True)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run_side(settings, questions: list[str], victims: list[str]) -> dict:
    from flows.operate import DeleteParams, delete
    from flows.release import release
    from schemas.retrieval import Principal
    from tasks.query.retriever import Retriever
    from tasks.query.searchable import drop_caches

    public = Principal(principal_id="default", tenant="default", groups=["public"])
    first, first_s = timed(lambda: release(paths=[str(CORPUS)], settings=settings))
    assert first.published, "first ingest published nothing"
    again, again_s = timed(lambda: release(paths=[str(CORPUS)], settings=settings))
    assert not again.published
    drop_caches()
    retriever, open_s = timed(lambda: Retriever.open(settings, public))
    retriever.prime(questions)
    _, bm25_s = timed(lambda: retriever.warm_start(questions[0], k=10))  # BM25 index built, then saved
    drop_caches()
    retriever, reopen_s = timed(lambda: Retriever.open(settings, public))
    retriever.prime(questions)
    _, bm25_load_s = timed(lambda: retriever.warm_start(questions[0], k=10))  # index read back
    latencies = [timed(lambda q=q: retriever.warm_start(q, k=10))[1] for q in questions]
    deletions = []
    for doc_id in victims:
        result = delete(DeleteParams(doc_ids=[doc_id], reason="bench"), settings=settings)
        deletions.append({"masked_s": result.masked_after_s, "published_s": result.published_after_s,
                          "purged_s": result.purged_after_s})
    return {
        "first_ingest_s": first_s, "unchanged_reingest_s": again_s,
        "open_cold_s": open_s, "first_query_with_bm25_build_s": bm25_s,
        "reopen_s": reopen_s, "first_query_with_bm25_load_s": bm25_load_s,
        "warm_start_ms_median": 1000 * statistics.median(latencies),
        "delete_masked_s_median": statistics.median(d["masked_s"] for d in deletions),
        "delete_published_s_median": statistics.median(d["published_s"] for d in deletions),
        "delete_purged_s_median": statistics.median(d["purged_s"] for d in deletions),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--deletions", type=int, default=3)
    a = ap.parse_args()

    from schemas.settings import EmbeddingSettings, MabillonSettings
    from tasks.embedding import load_embedder

    load_embedder(EmbeddingSettings())  # both sides start with the model loaded
    warm_up()  # and with Prefect's ephemeral API and Great Expectations started
    questions = [json.loads(line)["question"] for line in DEV.open(encoding="utf-8")][:a.questions]
    records = [json.loads(line) for line in CORPUS.open(encoding="utf-8")]
    victims = [r["doc_id"] for r in records[10:10 + a.deletions]]
    server, endpoint = start_s3_server()
    root = Path(tempfile.mkdtemp(prefix="bench-storage-"))
    try:
        bucket = S3Bucket(endpoint, "mabillon-bench")
        bucket.client().create_bucket(Bucket=bucket.name)
        local = run_side(MabillonSettings(home=root / "local"), questions, victims)
        s3 = run_side(MabillonSettings(home=root / "s3", warehouse_dir=bucket.uri("warehouse"),
                                       storage=bucket.storage), questions, victims)
    finally:
        stop_s3_server(server)
        shutil.rmtree(root, ignore_errors=True)
    report = {"documents": len(records), "questions": len(questions), "deletions": len(victims),
              "local": local, "s3": s3,
              "s3_over_local": {k: s3[k] / local[k] for k in local if local[k]}}
    save_report("storage", report)


if __name__ == "__main__":
    main()
