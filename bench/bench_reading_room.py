"""Reading room (issue 14): IIIF image latency cold and cached, evidence page time, and a question
through the warm reading room against a cold `mabillon ask`, all in one run.

    .venv/bin/python bench/bench_reading_room.py [--home DIR] [--questions 8] [--images 60]

Without --home the bundled sample is built and ingested into a temporary home first. The
reading room runs as its own process (`mabillon reading-room`), measured over loopback HTTP.
Writes bench/results/bench_reading_room.json.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import free_port, offline_env, save_report  # noqa: E402

MABILLON = Path(sys.executable).with_name("mabillon")
QUESTIONS = [
    "Quels commissaires le conseil de Vaux-le-Moutier charge-t-il de visiter les greniers ?",
    "Quelles réparations le conseil municipal de Saint-Aubin-des-Bois a-t-il votées pour l'école ?",
    "Que demandent les habitants de Champsecret au sujet du sel ?",
    "Qui est né à Rânes en août 1854 ?",
    "Quand ont lieu les élections annoncées à Tourouvre en 1848 ?",
    "Combien de bœufs à la foire de la Saint-Martin à Longny ?",
    "Que demande le préfet de l'Orne sur le fourrage en 1871 ?",
    "Comment classer les fonds communaux selon la note de 1952 ?",
]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def summary(values: list[float]) -> dict:
    ms = [v * 1000 for v in values]
    return {"n": len(ms), "p50_ms": round(pct(ms, 0.5), 1), "p95_ms": round(pct(ms, 0.95), 1),
            "mean_ms": round(statistics.fmean(ms), 1)}


def build_home(root: Path) -> Path:
    from flows.make_sample import make_sample

    sample = root / "sample"
    make_sample(sample)
    home = root / "home"
    done = subprocess.run([str(MABILLON), "ingest", str(sample), "--home", str(home)],
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return home


def start_room(home: Path, port: int, log: Path) -> subprocess.Popen:
    with log.open("wb") as sink:
        process = subprocess.Popen([str(MABILLON), "reading-room", "--home", str(home), "--port", str(port)],
                                   stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.3)
    raise SystemExit(f"reading room did not start; see {log}")


def wait_warm(log: Path, timeout_s: float = 300) -> float:
    """Seconds the room logged for its warm-up (retriever, models, Prefect API)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "reading room warm in" in text:
            return float(text.split("reading room warm in", 1)[1].split("s", 1)[0])
        time.sleep(0.5)
    raise SystemExit(f"reading room never logged its warm-up; see {log}")


def timed_get(client: httpx.Client, url: str) -> float:
    start = time.perf_counter()
    r = client.get(url)
    elapsed = time.perf_counter() - start
    if r.status_code != 200:
        raise SystemExit(f"{url}: {r.status_code} {r.text[:300]}")
    return elapsed


def image_latency(client: httpx.Client, base: str, image_ids: list[str], n: int, seed: int) -> dict:
    """First request of each page (base render + encode), first request of a new region on a
    rendered page (crop, resize, encode), and the same requests again (response cache)."""
    rng = random.Random(seed)
    infos = {i: client.get(f"{base}/iiif/3/{i}/info.json").json() for i in image_ids}
    first_page = [timed_get(client, f"{base}/iiif/3/{i}/0,0,512,512/256,/0/default.jpg") for i in image_ids]
    urls = []
    for _ in range(n):
        ident = rng.choice(image_ids)
        w, h = infos[ident]["width"], infos[ident]["height"]
        rw, rh = rng.randint(200, w // 2), rng.randint(100, h // 3)
        x, y = rng.randint(0, w - rw), rng.randint(0, h - rh)
        urls.append(f"{base}/iiif/3/{ident}/{x},{y},{rw},{rh}/{min(900, rw)},/0/default.jpg")
    cold = [timed_get(client, u) for u in urls]
    cached = [timed_get(client, u) for u in urls]
    full = [timed_get(client, f"{base}/iiif/3/{i}/full/1000,/0/default.jpg") for i in image_ids]
    return {"first_request_of_a_page": summary(first_page), "uncached_region": summary(cold),
            "cached": summary(cached), "full_page_1000px_uncached": summary(full)}


def run(args: argparse.Namespace) -> dict:
    offline_env()
    # a loaded machine starts Prefect's local API slowly; the default 20 s wait then fails
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    root = Path(tempfile.mkdtemp(prefix="bench-reading-"))
    home = Path(args.home).resolve() if args.home else build_home(root)
    load_before = os.getloadavg()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = root / "reading-room.log"
    started = time.perf_counter()
    room = start_room(home, port, log)
    listening_s = time.perf_counter() - started
    try:
        warm_s = wait_warm(log)
        client = httpx.Client(timeout=300)
        docs = client.get(f"{base}/documents").text
        from tasks.reading.catalog import Catalog
        from tasks.store.layout import StoreLayout
        from tasks.store.routing import read_routing
        from schemas.settings import MabillonSettings

        layout = StoreLayout.from_settings(MabillonSettings(home=home))
        catalog = Catalog.load(layout, read_routing(layout).serving)
        image_ids = [f"{r.revision_id}-p{p.page_no:04d}" for r in catalog.revisions.values()
                     if r.media_type.startswith("image/") or r.media_type == "application/pdf"
                     for p in catalog.pages[r.revision_id]]
        images = image_latency(client, base, image_ids, args.images, args.seed)

        questions = (QUESTIONS * ((args.questions // len(QUESTIONS)) + 1))[:args.questions]
        room_wall, framework, query_ids, tops = [], [], [], []
        image_revisions = {i.rsplit("-p", 1)[0] for i in image_ids}
        for q in questions:
            start = time.perf_counter()
            r = client.post(f"{base}/api/ask", json={"question": q})
            room_wall.append(time.perf_counter() - start)
            r.raise_for_status()
            framework.append(r.json()["cost"]["framework_s"])
            query_ids.append(r.json()["query_id"])
            top = r.json()["documents"][0] if r.json()["documents"] else {}
            tops.append({"question": q[:60], "top": top.get("doc_id"),
                         "page_image": catalog.current.get(top.get("doc_id")) in image_revisions})
        evidence_first = [timed_get(client, f"{base}/queries/{qid}") for qid in query_ids]
        evidence_again = [timed_get(client, f"{base}/queries/{qid}") for qid in query_ids]

        cli_wall, cli_framework = [], []
        for q in questions[:args.cli_questions]:
            start = time.perf_counter()
            done = subprocess.run([str(MABILLON), "ask", q, "--home", str(home), "--json"],
                                  capture_output=True, text=True)
            cli_wall.append(time.perf_counter() - start)
            if done.returncode:
                raise SystemExit(done.stderr[-2000:])
            import json

            cli_framework.append(json.loads(done.stdout)["cost"]["framework_s"])
    finally:
        from flows.serve import stop_group

        stop_group(room, 30)
    room_med = statistics.median(room_wall[1:] or room_wall)
    cli_med = statistics.median(cli_wall)
    return {
        "home": str(home), "documents_page_bytes": len(docs), "pages_with_images": len(image_ids),
        "load_average_before": [round(v, 2) for v in load_before],
        "reading_room_listening_s": round(listening_s, 2), "reading_room_warm_up_s": warm_s,
        "images": images,
        "evidence_page": {"first_view": summary(evidence_first), "again": summary(evidence_again)},
        "question": {
            "reading_room_warm": {"first": round(room_wall[0], 3), "after_first": summary(room_wall[1:] or room_wall),
                                  "framework_s_median": round(statistics.median(framework[1:] or framework), 4)},
            "cli_cold_mabillon_ask": {**summary(cli_wall), "framework_s_median": round(statistics.median(cli_framework), 4)},
            "cli_over_room_median": round(cli_med / room_med, 1),
        },
        "top_documents": tops,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="a home with a serving generation (default: build the sample)")
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--cli-questions", type=int, default=3)
    parser.add_argument("--images", type=int, default=60)
    parser.add_argument("--seed", type=int, default=14)
    save_report("bench_reading_room", run(parser.parse_args()))


if __name__ == "__main__":
    main()
