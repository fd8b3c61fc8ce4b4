"""Cold start of the command line (issue 15): whole-process wall time of `ask`, `delete`, an
unchanged `ingest`, and the read-only commands, on the full shared corpus, without and with a
`mabillon serve` running for the same home.

    .venv/bin/python bench/bench_cli.py [--home DIR] [--repeats 3]

Every figure is the median of `--repeats` runs of the real `mabillon` executable, each a new
process (what a person waits for). The unchanged re-ingest is reported as a ratio against the
first ingest measured the same way in the same run (or given with --first-ingest-s when --home
reuses a published home). A cold `ask` is also split into its phases (interpreter and imports,
opening the retriever, answering) in one more process, to say how much is the retriever's.
Results: JSON on stdout and bench/results/cli.json; copy the table into docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import CORPUS, DEV, save_report  # noqa: E402

MABILLON = Path(sys.executable).with_name("mabillon")


def env_for(home: Path, prefect_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "MABILLON_"))}
    return {**env, "MABILLON_HOME": str(home), "PREFECT_HOME": str(prefect_home)}


def timed(args: list[str], env: dict[str, str], expect: int = 0) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([str(MABILLON), *args], env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    if done.returncode != expect:
        raise RuntimeError(f"mabillon {' '.join(args)} exited {done.returncode}: {done.stderr[-1500:]}")
    return wall


def median_of(make_args, env, repeats: int) -> dict:
    walls = [timed(make_args(i), env) for i in range(repeats)]
    return {"median_s": round(statistics.median(walls), 3), "runs_s": [round(w, 3) for w in walls]}


def questions(n: int) -> list[str]:
    rows = [json.loads(line) for line in DEV.read_text("utf-8").splitlines() if line.strip()]
    return [r["question"] for r in rows[:n]]


def some_doc_ids(home: Path, n: int) -> list[str]:
    from schemas.settings import MabillonSettings
    from tasks.store.documents import document_ids
    from tasks.store.layout import StoreLayout
    from tasks.store.routing import read_routing

    layout = StoreLayout.from_settings(MabillonSettings(home=home))
    ids = document_ids(layout, read_routing(layout).serving)
    return ids[-n:]


def suite(env: dict[str, str], home: Path, repeats: int, qs: list[str], doomed: list[str]) -> dict:
    """The commands measured, in an order that leaves the home as it found it but for the
    deletions (each a real deletion: a new generation is published without the document)."""
    probe = some_doc_ids(home, 1)[0]
    return {
        "generations": median_of(lambda i: ["generations"], env, repeats),
        "documents --match": median_of(lambda i: ["documents", "--match", "séance", "--limit", "5"], env, repeats),
        "lineage": median_of(lambda i: ["lineage", probe], env, repeats),
        "ask": median_of(lambda i: ["ask", qs[i % len(qs)], "--limit", "5"], env, repeats),
        "ingest (unchanged)": median_of(lambda i: ["ingest", str(CORPUS)], env, repeats),
        "delete": median_of(lambda i: ["delete", doomed.pop(0), "--reason", "benchmark"], env, repeats),
    }


PHASES = r"""
import json, sys, time
t0 = time.perf_counter()
from schemas.settings import MabillonSettings
from flows.answer import AskParams, answer
from tasks.access.principals import resolve_principal
from tasks.query.retriever import Retriever
t1 = time.perf_counter()
settings = MabillonSettings()
principal = resolve_principal(settings, None)
retriever = Retriever.open(settings, principal)
t2 = time.perf_counter()
answer(settings, AskParams(question=sys.argv[1]), principal, retriever)
t3 = time.perf_counter()
print(json.dumps({"imports_s": t1 - t0, "open_retriever_s": t2 - t1, "answer_s": t3 - t2}))
"""


def ask_phases(env: dict[str, str], question: str) -> dict:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PHASES, question], env=env, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-1500:])
    phases = json.loads(done.stdout.strip().splitlines()[-1])
    phases = {k: round(v, 3) for k, v in phases.items()}
    phases["interpreter_and_exit_s"] = round(wall - sum(phases.values()), 3)
    phases["process_s"] = round(wall, 3)
    return phases


def start_serve(env: dict[str, str], home: Path, log: Path) -> subprocess.Popen:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([str(MABILLON), "serve", "--port", str(port)], env=env,
                               stdout=log.open("wb"), stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    state = home / "manifests" / ".serve.json"
    deadline = time.monotonic() + 600
    while not state.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"serve did not start: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(1)
    return process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="a home with the shared corpus published (else built)")
    parser.add_argument("--first-ingest-s", type=float, help="first-ingest time of --home, if known")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    prefect_home = work / "prefect"
    load = os.getloadavg()
    home = args.home or work / "home"
    env = env_for(home, prefect_home)
    first = args.first_ingest_s
    if args.home is None:
        first = timed(["ingest", str(CORPUS)], env)
    qs = questions(args.repeats)
    doomed = some_doc_ids(home, 2 * args.repeats)
    report = {"corpus": str(CORPUS), "repeats": args.repeats, "load_before": [round(x, 2) for x in load],
              "first_ingest_s": round(first, 2) if first else None}
    report["cold"] = suite(env, home, args.repeats, qs, doomed)
    report["cold_ask_phases"] = ask_phases(env, qs[0])
    serve = start_serve(env, home, work / "serve.log")
    try:
        timed(["ask", qs[0]], env)  # waits for the warm-up, like a first question would
        report["with_serve"] = suite(env, home, args.repeats, qs, doomed)
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(120)
    if first:
        for side in ("cold", "with_serve"):
            report[side]["ingest (unchanged)"]["of_first_ingest"] = round(
                report[side]["ingest (unchanged)"]["median_s"] / first, 4)
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    save_report("cli", report)


if __name__ == "__main__":
    main()
