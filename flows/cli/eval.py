"""CLI command `eval`: retrieval quality of a system on a question set (issue 5)."""
from __future__ import annotations

import argparse

from flows.cli.main import add_command, emit
from schemas.settings import MabillonSettings


def register(sub, common) -> None:
    p = add_command(sub, common, "eval", "measure recall@k and MRR of a system on a question set",
                    "mabillon eval ../shared/histqa1887/dev.jsonl --system bm25,hybrid --report reports/")
    p.add_argument("questions", help="JSONL: question_id, question, question_type, gold_ids")
    p.add_argument("--system", default="hybrid",
                   help="a system or several separated by commas, e.g. bm25,hybrid,trace")
    p.add_argument("--k", default="3,5,10", type=cutoffs,
                   help="recall cut-offs, positive integers, comma-separated")
    p.add_argument("--limit", type=int, help="first N questions only")
    p.add_argument("--provider", help="LLM provider of `trace` (default: from settings)")
    p.add_argument("--concurrency", type=int, default=1, help="questions answered at once")
    p.add_argument("--principal", help="principal name from MABILLON_HOME/principals.json (default: the default principal)")
    p.add_argument("--generation", help="default: the serving generation")
    p.add_argument("--report", help="folder for per-question Parquet rows, plots and report")
    p.set_defaults(func=cmd_eval)


def cutoffs(text: str) -> list[int]:
    """`--k 1,3,10` as sorted distinct positive integers; anything else is refused by name."""
    try:
        ks = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--k takes positive integers separated by commas (e.g. 3,5,10), not {text!r}")
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError(
            f"--k takes positive integers separated by commas (e.g. 3,5,10), not {text!r}")
    return ks


def human(summary: dict) -> str:
    o = summary["overall"]
    ks = summary["ks"]
    lines = [f"{summary['system']} on {summary['generation']}: {summary['n']} questions, "
             f"{summary['cost']['wall_s']:.1f} s" + (f", {summary['errors']} errors"
                                                    if summary["errors"] else ""),
             "  overall  " + "  ".join(f"R@{k} {o[f'recall@{k}']:.3f}" for k in ks)
             + f"  MRR {o['mrr_first']:.3f}  MRR-multi {o['mrr_multi']:.3f}"]
    if o.get("r_acc") is not None:
        lines.append(f"  accepted: precision {o['p_acc'] or 0:.3f} recall {o['r_acc']:.3f} "
                     f"mean size {o['accepted_mean']:.2f}")
    for t, m in summary["by_type"].items():
        lines.append(f"  {t:<14} n={m['n']:<4}" + "  ".join(
            f"R@{k} {m[f'recall@{k}']:.3f}" for k in ks) + f"  MRR-multi {m['mrr_multi']:.3f}")
    if summary.get("judge_trained_on_these_questions"):
        lines.append("  NOTE: the learned judge was trained on these questions; not validation "
                     "(mabillon train-judge --cv 5 gives cross-validated figures)")
    if summary.get("misses"):
        lines.append("  misses: " + ", ".join(f"{k} {v}" for k, v in summary["misses"].items()))
    return "\n".join(lines)


def cmd_eval(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from pathlib import Path

    from flows.cli.errors import CliError, Exit
    from flows.cli.prefect_api import connect
    from tasks.eval.systems import SYSTEMS

    systems = [s.strip() for s in args.system.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise CliError(f"unknown system {', '.join(unknown)}", Exit.USAGE, f"choose from {', '.join(SYSTEMS)}")
    if not Path(args.questions).is_file():
        raise CliError(f"no such question file: {args.questions}", Exit.NOT_FOUND)
    with connect(settings) as link:
        from flows.evaluate import EvalOptions, evaluate

        options = EvalOptions(systems=systems, ks=args.k, limit=args.limit, provider=args.provider,
                              concurrency=args.concurrency, principal=args.principal,
                              generation=args.generation, report_dir=args.report)
        link.ready()
        summaries = evaluate(questions_path=args.questions, options=options, settings=settings)
    payload = summaries[0] if len(summaries) == 1 else summaries
    text = "\n".join(human(s) for s in summaries)
    if args.report:
        text += f"\nreport: {args.report}/report.html"
    emit(args, payload, text)
    return 0
