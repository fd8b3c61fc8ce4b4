"""`mabillon ask "QUESTION"`: TRACE over the serving generation, a ranked list with citations."""
from __future__ import annotations

import argparse
import logging

from flows.cli.main import emit
from schemas.settings import MabillonSettings


def register(sub, common) -> None:
    p = sub.add_parser("ask", parents=[common],
                       help="answer a question with ranked source documents (TRACE)")
    p.add_argument("question")
    p.add_argument("--principal", help="a name in MABILLON_HOME/principals.json")
    p.add_argument("--generation", help="default: the serving generation")
    p.add_argument("--provider", choices=["openai", "learned", "rules", "replay", "llamacpp"],
                   help="default: openai when MABILLON_LLM__BASE_URL is set, else learned "
                        "(rules when its model file is unusable)")
    p.add_argument("--limit", type=int, default=10, help="documents in the human list")
    p.add_argument("--as-of", help="ISO 8601 date or time (2027-01-01, 2027-01-01T09:00+01:00): answer "
                                   "as the archive stood then; a future time needs an operator")
    p.set_defaults(func=cmd_ask)


def cmd_ask(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.ask import AskParams, ask
    from tasks.query.present import render_text

    logging.basicConfig(level=logging.WARNING)
    params = AskParams(question=args.question, principal=args.principal,
                       generation=args.generation, provider=args.provider, as_of=args.as_of)
    package = ask(params=params, settings=settings)
    emit(args, package.model_dump(mode="json"), render_text(package, args.limit))
    return 0
