"""Query latency of `ask` (issue 4): framework time vs model time per question, and what the
loop returns, on the serving generation and the shared development questions.

    .venv/bin/python bench/bench_ask.py --home /tmp/mab-agent --limit 100 [--provider rules] [--flow 5]

Prints one JSON document; `--write docs/benchmarks.md` replaces the "Query latency (issue 4)"
section there with the figures. Retrieval quality figures are for orientation only; the
evaluation harness (`mabillon eval`) is the reference.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import replace_section  # noqa: E402

SECTION = "## Query latency (issue 4)"


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def recall(ranked: list[str], gold: list[str], k: int) -> float:
    return len(set(ranked[:k]) & set(gold)) / len(gold)


def mrr_multi(ranked: list[str], gold: list[str]) -> float:
    pos = {d: i for i, d in enumerate(ranked, 1)}
    return sum(1 / pos[g] for g in gold if g in pos) / len(gold)


def run(args: argparse.Namespace) -> dict:
    from schemas.query import LoopParams
    from schemas.settings import MabillonSettings
    from tasks.llm.registry import make_provider
    from tasks.query.loop import answer_question
    from tasks.access.principals import resolve_principal
    from tasks.query.retriever import Retriever

    settings = MabillonSettings(home=Path(args.home).resolve())
    t0 = time.perf_counter()
    retriever = Retriever.open(settings, resolve_principal(settings))
    provider = make_provider(settings.llm, args.provider)
    # a second provider answering the same questions in the same run, order alternating per
    # question, so a loaded machine slows both alike and their ratio stays meaningful
    baseline = make_provider(settings.llm, args.baseline) if args.baseline else None
    params: LoopParams = settings.query
    first = answer_question(retriever, "séance de la Chambre", provider, params)  # warm caches
    if baseline is not None:
        answer_question(retriever, "séance de la Chambre", baseline, params)
    base_fw: list[float] = []
    open_s = time.perf_counter() - t0
    rows = [json.loads(l) for l in Path(args.questions).read_text("utf-8").splitlines() if l.strip()]
    rows = rows[:args.limit] if args.limit else rows
    fw, model, total, calls, n_acc, ret = [], [], [], [], [], []
    q_trace = {"recall@10": [], "mrr_multi": []}
    q_hybrid = {"recall@10": [], "mrr_multi": []}
    for n, row in enumerate(rows):
        if baseline is not None and n % 2:
            base_fw.append(answer_question(retriever, row["question"], baseline, params)
                           .cost.framework_s)
        p = answer_question(retriever, row["question"], provider, params,
                            question_id=row.get("question_id"))
        if baseline is not None and not n % 2:
            base_fw.append(answer_question(retriever, row["question"], baseline, params)
                           .cost.framework_s)
        fw.append(p.cost.framework_s)
        ret.append(p.cost.retrieval_s)
        model.append(p.cost.model_s)
        total.append(p.cost.total_s)
        calls.append(p.cost.llm_calls)
        n_acc.append(len(p.accepted))
        ranked = [d.doc_id for d in p.documents]
        hybrid = [h.doc_id for h in retriever.warm_start(row["question"], 20)]
        for dst, rk in ((q_trace, ranked), (q_hybrid, hybrid)):
            dst["recall@10"].append(recall(rk, row["gold_ids"], 10))
            dst["mrr_multi"].append(mrr_multi(rk, row["gold_ids"]))
    return {
        "generation": retriever.generation, "provider": provider.name, "n": len(rows),
        "machine": f"{platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cores",
        "open_and_first_s": round(open_s, 2),
        "framework_s": {"mean": round(statistics.mean(fw), 4), "p50": round(pct(fw, .5), 4),
                        "p95": round(pct(fw, .95), 4), "max": round(max(fw), 4)},
        "retrieval_s": {"mean": round(statistics.mean(ret), 4), "p50": round(pct(ret, .5), 4)},
        "loop_s": {"mean": round(statistics.mean(f - r for f, r in zip(fw, ret)), 4),
                   "p95": round(pct([f - r for f, r in zip(fw, ret)], .95), 4)},
        "model_s": {"mean": round(statistics.mean(model), 4)},
        "torch_threads": args.torch_threads,
        "load_avg": __import__("os").getloadavg()[0],
        "total_s": {"mean": round(statistics.mean(total), 4), "p95": round(pct(total, .95), 4)},
        "llm_calls_mean": round(statistics.mean(calls), 2),
        "accepted_mean": round(statistics.mean(n_acc), 2),
        "trace": {k: round(statistics.mean(v), 4) for k, v in q_trace.items()},
        "hybrid": {k: round(statistics.mean(v), 4) for k, v in q_hybrid.items()},
        "params": params.model_dump(),
        "baseline": ({"provider": baseline.name,
                      "framework_s_mean": round(statistics.mean(base_fw), 4),
                      "framework_s_p95": round(pct(base_fw, .95), 4),
                      "ratio_mean": round(statistics.mean(fw) / statistics.mean(base_fw), 3)}
                     if baseline is not None else None),
        "command": " ".join(["bench/bench_ask.py", *sys.argv[1:]]),
    }


def flow_wall(settings, questions: list[str]) -> dict:
    """Wall time of the `ask` flow in this process once its caches are open (Prefect run,
    loop, evidence artifact): what tests/flows/test_ask.py bounded at 10 s (framework 2 s)
    before issue 31 moved timings out of the tests. Target: < 10 s, framework < 2 s."""
    from flows.ask import AskParams, ask

    ask(params=AskParams(question="séance"), settings=settings)  # opens caches
    wall, fw = [], []
    for q in questions:
        t0 = time.perf_counter()
        package = ask(params=AskParams(question=q), settings=settings)
        wall.append(time.perf_counter() - t0)
        fw.append(package.cost.framework_s)
    return {"n": len(wall), "wall_s": {"p50": round(pct(wall, .5), 3), "max": round(max(wall), 3)},
            "framework_s_max": round(max(fw), 4)}


def section(result: dict) -> str:
    fw, tot = result["framework_s"], result["total_s"]
    return "\n".join([
        SECTION, "",
        f"`{result['command']}` — generation `{result['generation']}`, provider "
        f"`{result['provider']}`, {result['n']} development questions, one at a time, on "
        f"{result['machine']} (1-min load average {result['load_avg']:.1f} at the end: other "
        f"sessions shared the CPUs; torch threads {result['torch_threads'] or 'default'}).", "",
        "| measure | value |", "|---|---|",
        f"| framework s / question (mean, p50, p95, max) | {fw['mean']}, {fw['p50']}, {fw['p95']}, {fw['max']} |",
        f"| of which retrieval s (mean, p50; query embedding included) | {result['retrieval_s']['mean']}, {result['retrieval_s']['p50']} |",
        f"| of which the loop's own work s (mean, p95) | {result['loop_s']['mean']}, {result['loop_s']['p95']} |",
        f"| model s / question (mean) | {result['model_s']['mean']} |",
        f"| total s / question (mean, p95) | {tot['mean']}, {tot['p95']} |",
        f"| LLM calls / question (mean) | {result['llm_calls_mean']} |",
        f"| accepted documents / question (mean) | {result['accepted_mean']} |",
        f"| open retriever + first question (s) | {result['open_and_first_s']} |",
        f"| recall@10 trace / hybrid (orientation) | {result['trace']['recall@10']} / {result['hybrid']['recall@10']} |",
        f"| mrr_multi trace / hybrid (orientation) | {result['trace']['mrr_multi']} / {result['hybrid']['mrr_multi']} |",
        *([f"| warm `ask` flow wall s, {f['n']} questions (p50, max; framework max) | "
           f"{f['wall_s']['p50']}, {f['wall_s']['max']}; {f['framework_s_max']} |"]
          if (f := result.get("ask_flow")) else []),
        "",
        "Framework time is everything but waiting on the provider (retrieval, prompt rendering, "
        "validation, bookkeeping, lineage, record); with `rules` the provider's own time is the "
        "model time. Target: framework < 0.5 s per question.", ""])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", required=True)
    ap.add_argument("--questions", default=str(ROOT.parent / "shared/histqa1887/dev.jsonl"))
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--provider", default="learned")
    ap.add_argument("--baseline", help="a second provider timed on the same questions (e.g. rules)")
    ap.add_argument("--write", help="markdown file whose query-latency section to replace")
    ap.add_argument("--torch-threads", type=int, help="torch intra-op threads for query embedding")
    ap.add_argument("--flow", type=int, default=0, metavar="N",
                    help="also time N warm `ask` flow runs in this process (Prefect included)")
    args = ap.parse_args()
    if args.torch_threads:
        import torch
        torch.set_num_threads(args.torch_threads)
    import logging
    logging.basicConfig(level=logging.ERROR)
    result = run(args)
    if args.flow:
        from schemas.settings import MabillonSettings

        rows = [json.loads(l) for l in Path(args.questions).read_text("utf-8").splitlines() if l.strip()]
        result["ask_flow"] = flow_wall(MabillonSettings(home=Path(args.home).resolve()),
                                       [r["question"] for r in rows[:args.flow]])
    print(json.dumps(result, indent=2))
    if args.write:
        replace_section(Path(args.write), SECTION, section(result))


if __name__ == "__main__":
    main()
