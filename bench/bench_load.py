"""Load (issue 12): 8 concurrent `ask` calls, alone and while a release runs beside them.

    .venv/bin/python bench/bench_load.py --home /tmp/mab-load [--questions 48] [--concurrency 8]

The home gets the shared corpus published once (reused when it already serves a generation).
Each phase answers the same dev questions with `rules`, `concurrency` at a time, every question
on its own retriever of the generation that served when the phase began (what the `ask` flow
opens). Phase "alone": nothing else runs. Phase "with release": a `mabillon ingest` of new
records runs in another process at the same time and switches the serving generation mid-way.
Reported: throughput, p50/p95 latency per question, whether every answer equals the one given
alone, and peak RSS of this process and of the release. Baseline and loaded run are measured
in the same run; the load average before it is recorded.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import CORPUS, DEV, offline_env, replace_section, save_report  # noqa: E402

SECTION = "## Load: concurrent asks during a release (issue 12)"


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def new_records(n: int) -> list[dict]:
    """Records written for the benchmark (no corpus text), so the release has real work."""
    return [{"doc_id": f"load-{i:04d}", "corpus": "registres", "date": f"1887-05-{i % 28 + 1:02d}",
             "text": " ".join(f"Article {j}. Le conseil municipal de la commune {i} délibère sur "
                              f"l'entretien du chemin vicinal numéro {j} et le budget de l'école."
                              for j in range(10))} for i in range(n)]


def answer_all(settings, questions: list[str], concurrency: int, generation: str) -> tuple[list, list, float]:
    from tasks.llm.rules import RulesProvider
    from tasks.query.loop import answer_question
    from tasks.access.principals import default_principal
    from tasks.query.retriever import Retriever
    from tasks.store.layout import StoreLayout

    layout = StoreLayout.from_settings(settings)

    def one(q: str):
        started = time.perf_counter()
        retriever = Retriever.open(settings, default_principal(settings), generation=generation)
        package = answer_question(retriever, q, RulesProvider(), settings.query, layout=layout)
        return [d.doc_id for d in package.documents], time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(one, questions))
    return [r[0] for r in results], [r[1] for r in results], time.perf_counter() - started


def release_process(home: Path, export: Path) -> subprocess.Popen:
    env = dict(os.environ, MABILLON_HOME=str(home))
    return subprocess.Popen(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "flows.cli", "ingest",
                             str(export), "--json"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run(args: argparse.Namespace) -> dict:
    # a loaded machine starts Prefect's ephemeral server slowly
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
    offline_env()
    from flows.release import release
    from schemas.settings import MabillonSettings
    from tasks.store.layout import StoreLayout
    from tasks.store.routing import read_routing

    home = Path(args.home)
    home.mkdir(parents=True, exist_ok=True)
    settings = MabillonSettings(home=home)
    layout = StoreLayout.from_settings(settings)
    if read_routing(layout).serving is None:
        release(paths=[str(CORPUS)], settings=settings)
    generation = read_routing(layout).serving
    questions = [json.loads(line)["question"] for line in DEV.read_text("utf-8").splitlines()[:args.questions]]
    load_before = os.getloadavg()

    answer_all(settings, questions[:args.concurrency], args.concurrency, generation)  # warm-up
    alone, alone_s, alone_wall = answer_all(settings, questions, args.concurrency, generation)

    export = home / f"load-{int(time.time())}.jsonl"
    export.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in new_records(args.records)), "utf-8")
    proc = release_process(home, export)
    loaded, loaded_s, loaded_wall = answer_all(settings, questions, args.concurrency, generation)
    during = proc.poll() is None  # the release was still running when the asks finished
    out, err = proc.communicate(timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(err.decode()[-2000:])
    release_rss_mb = int(err.decode().strip().splitlines()[-1]) / 1024
    after = read_routing(layout).serving
    same = sum(a == b for a, b in zip(alone, loaded))
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "load_before": [round(x, 2) for x in load_before],
        "questions": len(questions), "concurrency": args.concurrency, "generation": generation,
        "release": {"records": args.records, "switched_to": after, "still_running_when_asks_ended": during,
                    "peak_rss_mb": round(release_rss_mb)},
        "alone": {"throughput_qps": round(len(questions) / alone_wall, 2),
                  "p50_s": round(pct(alone_s, 0.5), 3), "p95_s": round(pct(alone_s, 0.95), 3)},
        "with_release": {"throughput_qps": round(len(questions) / loaded_wall, 2),
                         "p50_s": round(pct(loaded_s, 0.5), 3), "p95_s": round(pct(loaded_s, 0.95), 3)},
        "answers_same_as_alone": f"{same}/{len(questions)}",
        "asker_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def write_section(report: dict, path: Path) -> None:
    a, w = report["alone"], report["with_release"]
    lines = [SECTION, "",
             f"`{' '.join(sys.argv)}` — {report['questions']} dev questions, `rules`, {report['concurrency']} "
             f"at a time, on {report['machine']}; load average before the run {report['load_before']}. "
             f"During the second phase a `mabillon ingest` of {report['release']['records']} new records ran "
             f"in another process and switched serving to {report['release']['switched_to']} "
             f"(still running when the asks ended: {report['release']['still_running_when_asks_ended']}).", "",
             "| phase | throughput (questions/s) | p50 latency | p95 latency |", "|---|---|---|---|",
             f"| alone | {a['throughput_qps']} | {a['p50_s']} s | {a['p95_s']} s |",
             f"| with a release | {w['throughput_qps']} | {w['p50_s']} s | {w['p95_s']} s |",
             f"| ratio | {w['throughput_qps'] / a['throughput_qps']:.2f}× | "
             f"{w['p50_s'] / a['p50_s']:.2f}× | {w['p95_s'] / a['p95_s']:.2f}× |", "",
             f"Answers identical to those given alone: {report['answers_same_as_alone']}. Peak RSS: "
             f"{report['asker_peak_rss_mb']} MB for the asking process (8 retrievers, one model), "
             f"{report['release']['peak_rss_mb']} MB for the release. Both share 2 cores, so the loaded "
             "figures are what a release costs researchers on this machine, not a floor.", ""]
    replace_section(path, SECTION, "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", required=True)
    parser.add_argument("--questions", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--records", type=int, default=60)
    parser.add_argument("--write", type=Path, help="replace this section of docs/benchmarks.md")
    report = run(parser.parse_args())
    save_report("load", report)
    if parser.parse_args().write:
        write_section(report, parser.parse_args().write)


if __name__ == "__main__":
    main()
