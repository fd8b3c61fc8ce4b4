"""Retrieval benchmark: the baselines (and variants of the warm start) on a question set.

    .venv/bin/python bench/bench_retrieval.py ../shared/histqa1887/dev.jsonl --home /tmp/mab-ret \
        [--systems bm25,dense,hybrid] [--variant NAME='{"weights": {"dense": 0.3}}' ...] [--json]

Each variant is the `hybrid` system with RetrievalSettings fields overridden; the output is a
markdown table (overall recall@k and MRR, recall@10 by question type) for docs/benchmarks.md.
Runs without Prefect, in this process, against the serving generation of --home.

    ... --models minilm,e5 --subset 80,120

compares embedding models on the dense channel instead: a random subset of questions (seed 7)
and documents (their gold documents plus random others), the serving generation's chunks
embedded in-process by each model, scored exactly (all subset chunks, max-pooled).
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
from tasks.access.principals import resolve_principal  # noqa: E402
from tasks.eval.questions import load_questions  # noqa: E402
from tasks.eval.run import evaluate  # noqa: E402
from tasks.eval.systems import Baseline  # noqa: E402
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


def compare_models(retriever: Retriever, questions, models: list[str], n_questions: int,
                   n_docs: int) -> str:
    import random

    import numpy as np

    from schemas.settings import EmbeddingSettings
    from tasks.eval.metrics import mean, question_metrics
    from tasks.embedding import load_embedder
    from tasks.query.view import max_pool

    rng = random.Random(7)
    qs = list(questions)
    rng.shuffle(qs)
    qs = qs[:n_questions]
    v = retriever.view
    docs = {g for q in qs for g in q.gold_ids}
    others = sorted(set(v.doc_ids.tolist()) - docs)
    rng.shuffle(others)
    docs |= set(others[:max(0, n_docs - len(docs))])
    rows = np.flatnonzero(np.isin(v.doc_ids[v.doc_codes], sorted(docs)) & retriever.allowed)
    texts = [v.texts[i] for i in rows]
    types = sorted({q.question_type for q in qs})
    lines = [f"{len(qs)} questions, {len(docs)} documents, {len(rows)} chunks", "",
             "| model | dense R@10 | MRR-multi | " + " | ".join(types) + " | s/chunk | s/query |",
             "|---|---|---|" + "---|" * (len(types) + 2)]
    for model in models:
        emb = load_embedder(EmbeddingSettings(model=model))
        t0 = time.perf_counter()
        doc_vecs = np.concatenate([emb.embed_documents(texts[i:i + 16])
                                   for i in range(0, len(texts), 16)])
        per_chunk = (time.perf_counter() - t0) / max(len(texts), 1)
        t0 = time.perf_counter()
        q_vecs = emb.embed_queries([q.question for q in qs])
        per_query = (time.perf_counter() - t0) / max(len(qs), 1)
        sims = q_vecs @ doc_vecs.T
        scored = [(q, question_metrics([h.doc_id for h in max_pool(v, rows, sims[i], 10)],
                                       q.gold_ids, [10])) for i, q in enumerate(qs)]
        by_type = [mean([m["recall@10"] for q, m in scored if q.question_type == t]) for t in types]
        lines.append(f"| {model} | {mean([m['recall@10'] for _, m in scored]):.3f} | "
                     f"{mean([m['mrr_multi'] for _, m in scored]):.3f} | "
                     + " | ".join(f"{x:.3f}" for x in by_type)
                     + f" | {per_chunk:.3f} | {per_query:.3f} |")
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
    ap.add_argument("--models", help="compare these embedding models on the dense channel")
    ap.add_argument("--subset", default="80,120", help="questions,documents for --models")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    settings = MabillonSettings(home=Path(args.home).resolve())
    ks = sorted(int(k) for k in args.k.split(","))
    questions = load_questions(Path(args.questions), args.limit)
    principal = resolve_principal(settings, None)
    base = Retriever.open(settings, principal)
    if args.models:
        n_q, n_d = (int(x) for x in args.subset.split(","))
        print(compare_models(base, questions, args.models.split(","), n_q, n_d))
        return 0
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
