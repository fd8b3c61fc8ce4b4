"""Does the OCR-quality prior help the hybrid warm start? Recall@10 and MRR across held-out folds.

    .venv/bin/python bench/bench_ocr_quality.py ../shared/histqa1887/dev.jsonl --home /tmp/ocrq-home \
        [--weights 0,0.25,0.5,1,2,4,8] [--folds 5]

The home serves the shared corpus (`mabillon ingest ../shared/histqa1887/corpus.jsonl --home …`),
published with `ocr_quality` on its chunks. Every question is answered once per weight of
`retrieval.ocr_weight` (hybrid, no agent). Questions are split into folds by gold set: questions
that share a gold document are one group (connected components), and groups are dealt to the
folds largest first, each to the lightest fold — so no gold document is on both sides of a
split (the folds the learned judge is cross-validated on, tasks/eval/judge_data.py). For each
fold the weight with the best mean recall@10 on the other folds (then MRR, then the smaller
weight) is judged on the fold; the weight is never chosen on the questions it is judged on. The report (bench/results/ocr_quality.json, and stdout) gives per fold the chosen
weight and held-out recall@10 / MRR against weight 0, the figures of every weight on all
questions, and how the values are spread (source, quantiles, gold against other documents).
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import offline_env, save_report  # noqa: E402

offline_env()

import numpy as np  # noqa: E402

from schemas.retrieval import RetrievalSettings  # noqa: E402
from schemas.settings import MabillonSettings  # noqa: E402
from tasks.access.principals import resolve_principal  # noqa: E402
from tasks.eval.judge_data import gold_folds, gold_groups  # noqa: E402
from tasks.eval.questions import load_questions  # noqa: E402
from tasks.eval.run import evaluate  # noqa: E402
from tasks.eval.systems import Baseline  # noqa: E402
from tasks.query.retriever import Retriever  # noqa: E402

KS = (3, 5, 10)


def spread(retriever: Retriever, questions) -> dict:
    """Sources and quantiles of the documents' values; gold documents against the others."""
    view = retriever.view
    q = view.ocr_quality
    if q is None:
        return {"recorded": False}
    first = np.unique(view.doc_codes, return_index=True)[1]
    docs = {view.doc_ids[view.doc_codes[r]]: float(q[r]) for r in first}
    sources = view.fetch(first, ["ocr_quality_source"]).column("ocr_quality_source").to_pylist()
    gold = {g for x in questions for g in x.gold_ids}
    known = np.array([v for v in docs.values() if not np.isnan(v)])

    def mean(ids) -> float:
        vals = [docs[d] for d in ids if d in docs and not np.isnan(docs[d])]
        return round(float(np.mean(vals)), 4) if vals else float("nan")
    return {"recorded": True, "documents": len(docs), "unknown": int(len(docs) - known.size),
            "sources": {s: sources.count(s) for s in sorted(set(sources), key=str)},
            "quantiles": {p: round(float(np.quantile(known, p / 100)), 4) for p in (0, 10, 25, 50, 75, 90, 100)},
            "mean_gold": mean(gold), "mean_other": mean(set(docs) - gold)}


def choose(per_weight: dict[float, dict], train: list[int], on: bool = False) -> float:
    """The best weight on the `train` questions (with `on`, the best weight above 0)."""
    def key(w: float):
        rows = per_weight[w]["rows"]
        return (-np.mean([rows[i]["recall@10"] for i in train]),
                -np.mean([rows[i]["mrr_first"] for i in train]), w)
    return min((w for w in per_weight if w > 0 or not on), key=key)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions")
    ap.add_argument("--home", required=True)
    ap.add_argument("--weights", default="0,0.25,0.5,1,2,4,8")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--limit", type=int)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    settings = MabillonSettings(home=Path(args.home).resolve())
    questions = load_questions(Path(args.questions), args.limit)
    principal = resolve_principal(settings, None)
    weights = sorted({float(w) for w in args.weights.split(",")} | {0.0})
    per_weight: dict[float, dict] = {}
    generation = ""
    report_spread: dict = {}
    for w in weights:
        params = RetrievalSettings.model_validate({**settings.retrieval.model_dump(), "ocr_weight": w})
        retriever = Retriever.open(settings.model_copy(update={"retrieval": params}), principal)
        generation = retriever.generation
        if not report_spread:
            report_spread = spread(retriever, questions)
        t0 = time.perf_counter()
        table, summary = evaluate(retriever, Baseline(name="hybrid", depth=20), questions, KS)
        rows = table.to_pylist()
        assert [r["question_id"] for r in rows] == [q.question_id for q in questions]
        per_weight[w] = {"rows": rows, "overall": summary["overall"], "wall_s": time.perf_counter() - t0}
        print(f"weight {w:g}: recall@10 {summary['overall']['recall@10']:.4f} "
              f"mrr {summary['overall']['mrr_first']:.4f}", file=sys.stderr)

    # the judge's folds (tasks/eval/judge_data.py): whole gold groups per fold
    folds_by_id = gold_folds(questions, args.folds)
    fold_of = [folds_by_id[q.question_id] for q in questions]
    n_groups = len(set(gold_groups(questions).values()))
    folds, held_base, held_chosen = [], [], []
    for f in range(args.folds):
        test = [i for i, x in enumerate(fold_of) if x == f]
        train = [i for i, x in enumerate(fold_of) if x != f]
        w, forced = choose(per_weight, train), choose(per_weight, train, on=True)

        def m(weight: float, key: str) -> float:
            return round(float(np.mean([per_weight[weight]["rows"][i][key] for i in test])), 4)
        # `on`: the best weight above 0 on the other folds, judged here (the feature forced on)
        folds.append({"fold": f, "n": len(test), "chosen_weight": w,
                      "recall@10_off": m(0.0, "recall@10"), "recall@10_chosen": m(w, "recall@10"),
                      "mrr_off": m(0.0, "mrr_first"), "mrr_chosen": m(w, "mrr_first"),
                      "on_weight": forced, "recall@10_on": m(forced, "recall@10"),
                      "mrr_on": m(forced, "mrr_first")})
        held_base += [per_weight[0.0]["rows"][i] for i in test]
        held_chosen += [per_weight[w]["rows"][i] for i in test]

    def pooled(rows, key):
        return round(float(np.mean([r[key] for r in rows])), 4)
    held = {"recall@10_off": pooled(held_base, "recall@10"), "recall@10_chosen": pooled(held_chosen, "recall@10"),
            "mrr_off": pooled(held_base, "mrr_first"), "mrr_chosen": pooled(held_chosen, "mrr_first"),
            "folds_better": sum(f["recall@10_chosen"] > f["recall@10_off"] for f in folds),
            "folds_worse": sum(f["recall@10_chosen"] < f["recall@10_off"] for f in folds)}
    # adopted only if held-out recall@10 rises without MRR falling, and more folds gain than lose
    held["helps"] = bool(held["recall@10_chosen"] > held["recall@10_off"]
                         and held["mrr_chosen"] >= held["mrr_off"]
                         and held["folds_better"] > held["folds_worse"])
    report = {
        "generation": generation, "questions": len(questions), "folds": args.folds,
        "date": time.strftime("%Y-%m-%d"), "spread": report_spread,
        "gold_groups": n_groups,
        "all_questions": {f"{w:g}": {k: round(v, 4) for k, v in per_weight[w]["overall"].items()
                                     if isinstance(v, float)} | {"wall_s": round(per_weight[w]["wall_s"], 1)}
                          for w in weights},
        "per_fold": folds, "held_out": held,
    }
    save_report("ocr_quality", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
