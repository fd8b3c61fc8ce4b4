"""CLI command `train-judge`: train (and with --cv, honestly validate) the learned judge."""
from __future__ import annotations

import argparse
import shlex
import sys

from flows.cli.main import add_command, emit
from schemas.settings import MabillonSettings


def register(sub, common) -> None:
    p = add_command(sub, common, "train-judge",
                    "train the learned relevance judge from development questions",
                    "mabillon train-judge ../shared/histqa1887/dev.jsonl --cv 5 --report reports/judge")
    p.add_argument("questions", help="JSONL with gold_ids, e.g. ../shared/histqa1887/dev.jsonl "
                                     "(its corpus must be published in --home)")
    p.add_argument("--output", help="model file (default: the packaged tasks/llm/judge.joblib)")
    p.add_argument("--cv", type=int, default=0, metavar="K",
                   help="also report K-fold figures, folds split by gold set (e.g. 5)")
    p.add_argument("--report", help="folder for the cross-validated report")
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--generation", help="default: the serving generation")
    p.set_defaults(func=cmd_train_judge)


def human(result: dict) -> str:
    lines = [f"judge model {result['model_file']} ({result['bytes']} bytes)",
             f"  digest {result['digest']}",
             f"  {result['rows']} rows ({result['positives']} gold) from {result['questions']} "
             f"questions on {result['generation']}, {result['train_s']} s"]
    cv = result.get("cv")
    if cv:
        lines.append(f"  cross-validated ({len(cv['systems'])} systems, folds by gold set):")
        for name, s in cv["systems"].items():
            o = s["overall"]
            lines.append(f"    {name:<14} R@10 {o['recall@10']:.3f}  MRR-multi {o['mrr_multi']:.3f}"
                         + (f"  accepted P {o['p_acc'] or 0:.3f} R {o['r_acc']:.3f}"
                            if o.get("r_acc") is not None else ""))
        lines.append(f"    calibration: Brier {cv['calibration']['brier']:.4f}")
    return "\n".join(lines)


def cmd_train_judge(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.train_judge import TrainJudgeOptions, train_judge
    from tasks.llm.judge_model import PACKAGED

    options = TrainJudgeOptions(questions=args.questions, output=args.output or str(PACKAGED),
                                cv_folds=args.cv, report_dir=args.report,
                                concurrency=args.concurrency, generation=args.generation,
                                command="mabillon " + shlex.join(sys.argv[1:]))
    result = train_judge(options=options, settings=settings)
    emit(args, result, human(result))
    return 0
