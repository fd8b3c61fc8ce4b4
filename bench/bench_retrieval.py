"""Retrieval benchmark: the baselines (and variants of the warm start) on a question set.

    .venv/bin/python bench/bench_retrieval.py ../shared/histqa1887/dev.jsonl --home /tmp/mab-ret \
        [--systems bm25,dense,hybrid] [--variant NAME='{"weights": {"dense": 0.3}}' ...] [--json]

Each variant is the `hybrid` system with RetrievalSettings fields overridden; the output is a
markdown table (overall recall@k and MRR, recall@10 by question type) for docs/benchmarks.md.
Runs without Prefect, in this process, against the serving generation of --home.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from schemas.retrieval import RetrievalSettings  # noqa: E402
from schemas.settings import MabillonSettings  # noqa: E402
from tasks.eval.questions import load_questions  # noqa: E402
from tasks.eval.run import evaluate  # noqa: E402
from tasks.eval.systems import Baseline  # noqa: E402
from tasks.query.principals import resolve_principal  # noqa: E402
from tasks.query.retriever import Retriever  # noqa: E402


def table(results: list[tuple[str, dict]], ks: list[int]) -> str:
    types = sorted({t for _, s in results for t in s["by_type"]})
    head = ([f"R@{k}" for k in ks] + ["MRR", "MRR-multi", "s/q"]
            + [f"R@{max(ks)} {t}" for t in types])
    lines = ["| system | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    for name, s in results:
        o = s["overall"]
        cells = [f"{o[f'recall@{k}']:.3f}" for k in ks] + [
            f"{o['mrr_first']:.3f}", f"{o['mrr_multi']:.3f}",
            f"{s['cost']['wall_s'] / max(s['n'], 1):.3f}"]
        cells += [f"{s['by_type'].get(t, {}).get(f'recall@{max(ks)}', 0):.3f}" for t in types]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions")
    ap.add_argument("--home", required=True)
    ap.add_argument("--systems", default="bm25,dense,hybrid")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=JSON overrides of RetrievalSettings, run as a hybrid system")
    ap.add_argument("--k", default="3,5,10")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    settings = MabillonSettings(home=Path(args.home).resolve())
    ks = sorted(int(k) for k in args.k.split(","))
    questions = load_questions(Path(args.questions), args.limit)
    principal = resolve_principal(settings, None)
    base = Retriever.open(settings, principal)
    results: list[tuple[str, dict]] = []
    for name in [s for s in args.systems.split(",") if s]:
        _, summary = evaluate(base, Baseline(name=name, depth=max(ks + [20])), questions, ks)
        results.append((name, summary))
    for spec in args.variant:
        name, _, overrides = spec.partition("=")
        params = RetrievalSettings.model_validate(
            {**settings.retrieval.model_dump(), **json.loads(overrides)})
        variant = Retriever.open(settings.model_copy(update={"retrieval": params}), principal)
        _, summary = evaluate(variant, Baseline(name="hybrid", depth=max(ks + [20])), questions, ks)
        results.append((f"hybrid[{name}]", summary))
    if args.json:
        print(json.dumps({n: s for n, s in results}, indent=2))
    else:
        print(f"generation {base.generation}, {len(questions)} questions, "
              f"{time.strftime('%Y-%m-%d')}\n")
        print(table(results, ks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
