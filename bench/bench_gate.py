"""Release-gate benchmarks (issue 16), on the full shared corpus:

1. the query-side cost of the time rule: warm-start latency on the serving generation's chunks
   without validity intervals and with intervals on a third of the documents (same chunks,
   vectors and questions; both in this run);
2. the mask at a query time, cached vs recomputed after a bound passes;
3. freshness of a one-document release (arrival in the drop folder → answerable), ungated and
   gated with an approval sent through the API as soon as the run pauses (the reviewer's own
   time excluded; the pause's 1 s poll included), against a real Prefect server.

    .venv/bin/python bench/bench_gate.py [--home DIR_WITH_PUBLISHED_CORPUS] [--questions 100]

--home names a home that already serves the corpus (it is copied, never changed); otherwise the
corpus is ingested first. Figures go to stdout and bench/results/gate.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import DEV, corpus_home, free_port, offline_env, save_report  # noqa: E402

offline_env()


def with_intervals(table, share: float, seed: int = 0):
    """The table with valid_from / valid_to on `share` of its documents: a third of those under an
    embargo ending within a year, a third withdrawn within the last year, a third bounded on both
    sides around now (so the mask has many bounds on either side of the query time)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    docs = sorted(set(table["doc_id"].to_pylist()))
    chosen = {d: i % 3 for i, d in enumerate(rng.permutation(docs)[: int(len(docs) * share)])}
    now = datetime.now(timezone.utc)
    starts, ends = [], []
    for doc in table["doc_id"].to_pylist():
        kind = chosen.get(doc)
        day = timedelta(days=int(rng.integers(1, 365)))
        starts.append(now + day if kind == 0 else now - day if kind == 2 else None)
        ends.append(now - day if kind == 1 else now + day if kind == 2 else None)
    ts = pa.timestamp("us", tz="UTC")
    out = table.drop_columns([c for c in ("valid_from", "valid_to") if c in table.schema.names])
    return out.append_column("valid_from", pa.array(starts, ts)).append_column("valid_to", pa.array(ends, ts)), len(chosen)


def retriever_over(table, lance_dir: Path, generation_label: str, embedder, principal, settings):
    import lancedb

    from tasks.query.retriever import Retriever
    from tasks.query.view import GenerationView

    lt = lancedb.connect(str(lance_dir)).create_table(generation_label, table, mode="overwrite")
    return Retriever(generation=generation_label, space_id=embedder.space.space_id,
                     view=GenerationView.from_table(table), lance_table=lt,
                     embed_queries=embedder.embed_queries, principal=principal,
                     retrieval=settings.retrieval, index_dir=None)


def time_queries(retriever, questions: list[str], rounds: int = 3) -> dict:
    retriever.prime(questions)
    retriever.warm_start(questions[0], 50)  # index built, caches warm
    per_round = []
    for _ in range(rounds):
        times = []
        for q in questions:
            t0 = time.perf_counter()
            retriever.warm_start(q, 50)
            times.append(time.perf_counter() - t0)
        per_round.append(statistics.median(times))
    return {"median_ms": round(statistics.median(per_round) * 1000, 2),
            "rounds_ms": [round(x * 1000, 2) for x in per_round]}


def mask_costs(view, principal, repeats: int = 200) -> dict:
    """The allowed set as every channel gets it (`AccessPolicy.allowed_set` over the compact view)."""
    from tasks.access.policy import AccessPolicy

    policy = AccessPolicy(principal)
    allowed = policy.allowed_set(view)
    allowed.mask
    t0 = time.perf_counter()
    for _ in range(repeats):
        allowed.mask
    cached = (time.perf_counter() - t0) / repeats
    now = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    for i in range(repeats):  # a new query time past a bound each time: recomputed
        policy.allowed_set(view, as_of=now + timedelta(days=i * 2)).mask
    fresh = (time.perf_counter() - t0) / repeats
    return {"rows": len(view), "cached_us": round(cached * 1e6, 2), "recomputed_us": round(fresh * 1e6, 1)}


def freshness_of(home: Path, api_url: str, gated: bool, n: int) -> dict:
    """Release one new record (ungated, or gated and approved at once through the API)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.release import ReleaseOptions, release
    from schemas.settings import MabillonSettings
    from tasks.store.layout import StoreLayout
    from tasks.store.release_records import read_release_records

    settings = MabillonSettings(home=home, gate={"questions": str(home.parent / "gate-questions.jsonl"),
                                                 "poll_s": 1, "k": 10})
    export = home.parent / f"drop-{'gated' if gated else 'open'}-{n}.jsonl"
    record = {"doc_id": f"bench-{'gated' if gated else 'open'}-{n}", "corpus": "le_gaulois",
              "date": "1887-05-01", "text": f"Chronique parlementaire numéro {n}: la Chambre reprend le "
                                              "débat sur les sucres et les droits sur les blés."}
    export.write_text(json.dumps(record, ensure_ascii=False) + "\n", "utf-8")
    stop = threading.Event()
    if gated:
        threading.Thread(target=approve_when_paused, args=(api_url, stop), daemon=True).start()
    t0 = time.perf_counter()
    with temporary_settings({PREFECT_API_URL: api_url}):
        result = release(paths=[str(export)], options=ReleaseOptions(gate=gated), settings=settings)
    wall = time.perf_counter() - t0
    stop.set()
    rec = read_release_records(StoreLayout.from_settings(settings), result.generation)[-1]
    return {"gated": gated, "decision": rec.decision.action, "freshness_s": round(rec.freshness.seconds, 2),
            "release_wall_s": round(wall, 2),
            "shadow_questions": rec.shadow.n if rec.shadow else 0}


def approve_when_paused(api_url: str, stop: threading.Event) -> None:
    import httpx

    while not stop.is_set():
        rows = httpx.post(f"{api_url}/flow_runs/filter", timeout=10,
                          json={"flow_runs": {"state": {"type": {"any_": ["PAUSED"]}}}}).json()
        for run in rows:
            schema = run["state"]["state_details"]["run_input_keyset"]["schema"]
            form = httpx.get(f"{api_url}/flow_runs/{run['id']}/input/{schema}", timeout=10).json()
            form = json.loads(form) if isinstance(form, str) else form  # stored as JSON text or object
            answer = {"generation": form["properties"]["generation"]["default"],
                      "decision": "approve", "reason": "bench: approved on sight"}
            httpx.post(f"{api_url}/flow_runs/{run['id']}/resume", json={"run_input": answer}, timeout=10)
            return
        time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home")
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--share", type=float, default=1 / 3)
    ap.add_argument("--releases", type=int, default=2, help="releases of each kind (freshness)")
    a = ap.parse_args()
    load_before = os.getloadavg()

    from flows.serve import start_server
    from schemas.settings import MabillonSettings
    from tasks.embedding import load_embedder
    from tasks.access.principals import default_principal
    from tasks.store.lance_store import open_generation_table
    from tasks.store.layout import StoreLayout
    from tasks.store.routing import read_routing

    root = Path(tempfile.mkdtemp(prefix="bench-gate-"))
    home = corpus_home(root / "home", a.home)
    settings = MabillonSettings(home=home)
    layout = StoreLayout.from_settings(settings)
    principal = default_principal(settings)
    dev = [json.loads(line) for line in DEV.open(encoding="utf-8")]
    questions = [q["question"] for q in dev[: a.questions]]

    # 1-2: the time rule on the query side
    plain = open_generation_table(layout, read_routing(layout).serving).to_arrow()
    bounded, n_docs = with_intervals(plain, a.share)
    embedder = load_embedder(settings.embedding)
    lance_dir = root / "lance-copy"
    sides = {"no_intervals": retriever_over(plain, lance_dir, "plain", embedder, principal, settings),
             "intervals": retriever_over(bounded, lance_dir, "bounded", embedder, principal, settings)}
    timing = {name: time_queries(r, questions) for name, r in sides.items()}
    visible = {name: int(r.allowed.sum()) for name, r in sides.items()}

    # 3: freshness, ungated and gated (shadowed on 30 dev questions, approved at once)
    (root / "gate-questions.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n"
                                                       for q in dev[:30]), "utf-8")
    server = start_server("127.0.0.1", free_port(), root / "server.log", prefect_home=root / "prefect")
    try:
        fresh = []
        for n in range(a.releases):
            fresh.append(freshness_of(home, server.api_url, gated=False, n=n))
            fresh.append(freshness_of(home, server.api_url, gated=True, n=n))
    finally:
        server.stop()

    def median_of(gated):
        return statistics.median(f["freshness_s"] for f in fresh if f["gated"] == gated)

    report = {
        "load_average_before": [round(x, 2) for x in load_before],
        "chunks": plain.num_rows, "documents_with_intervals": n_docs,
        "visible_chunks": visible, "questions": len(questions),
        "warm_start": timing,
        "warm_start_ratio_intervals_vs_none": round(timing["intervals"]["median_ms"]
                                                    / timing["no_intervals"]["median_ms"], 3),
        "mask": mask_costs(sides["intervals"].view, principal),
        "freshness": fresh,
        "freshness_median_s": {"ungated": median_of(False), "gated_approved_at_once": median_of(True)},
        "command": "python bench/bench_gate.py " + " ".join(sys.argv[1:]),
    }
    save_report("gate", report)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
