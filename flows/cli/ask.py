"""`mabillon ask "QUESTION"`: TRACE over the serving generation, a ranked list with citations.

With a `mabillon serve` running for the home, the question goes to its warm query service (the
model and the generation are already open there). Otherwise it is answered in this process
without Prefect: a question needs no orchestration, and its query record under
manifests/queries is the audit trail either way.
"""
from __future__ import annotations

import argparse
import logging
import sys

from flows.cli.errors import CliError, Exit
from flows.cli.main import add_command, emit
from schemas.settings import MabillonSettings
from tasks.llm.registry import PROVIDERS

log = logging.getLogger(__name__)


def register(sub, common) -> None:
    p = add_command(sub, common, "ask", "answer a question with ranked source documents (TRACE)",
                    'mabillon ask "Qui présidait la séance d\'ouverture de 1887 ?" --limit 5')
    p.add_argument("question")
    p.add_argument("--principal", help="a name in MABILLON_HOME/principals.json (default: public)")
    p.add_argument("--generation", help="default: the serving generation")
    p.add_argument("--provider", choices=PROVIDERS,
                   help="default: openai when MABILLON_LLM__BASE_URL is set, else learned "
                        "(rules when its model file is unusable)")
    p.add_argument("--limit", type=int, default=10, help="documents in the printed list")
    p.add_argument("--export", choices=("ris", "bibtex", "csl-json", "csv"),
                   help="print the answer's references in this format instead of the list, in "
                        "ranked order (a reference manager imports RIS, BibTeX and CSL-JSON)")
    p.add_argument("--as-of", help="ISO 8601 date or time (2027-01-01, 2027-01-01T09:00+01:00): answer "
                                   "as the archive stood then; a future time needs an operator")
    p.set_defaults(func=cmd_ask)


def cmd_ask(args: argparse.Namespace, settings: MabillonSettings) -> int:
    question = " ".join(args.question.split())
    if len(question) < 3:
        raise CliError("the question is empty: write at least three characters", Exit.USAGE)
    if args.export and getattr(args, "json", False):
        raise CliError("--export prints the references themselves: leave out --json", Exit.USAGE)
    request = {"question": question, "principal": args.principal,
               "generation": args.generation, "provider": args.provider, "as_of": args.as_of}
    package = asked_of_serve(settings, request) or answered_here(settings, request)
    from schemas.query import EvidencePackage
    from tasks.query.present import render_text

    if args.export:
        sys.stdout.write(exported_references(settings, args.principal, package.get("query_id"), args.export))
        sys.stdout.flush()
        return 0
    emit(args, package, render_text(EvidencePackage.model_validate(package), args.limit))
    return 0


def exported_references(settings: MabillonSettings, principal_name: str | None, query_id: str | None,
                        fmt: str) -> str:
    """The answer's references as the reading room serves them to the same principal (the same
    access now: a document deleted or no longer allowed meanwhile is left out), with links to
    the room at its configured address."""
    from tasks.cite.export import query_references
    from tasks.cite.formats import render
    from tasks.access.principals import resolve_principal
    from tasks.reading.links import Links
    from tasks.reading.room import ReadingRoom

    if not query_id:
        raise CliError("this answer has no query record to export from", Exit.FAILED)
    rr = settings.reading_room
    base = rr.url or f"http://{rr.host}:{rr.port}"
    refs = query_references(ReadingRoom(settings), resolve_principal(settings, principal_name), query_id,
                            lambda at: Links.at(base, at))
    return render(refs, fmt)


def asked_of_serve(settings: MabillonSettings, request: dict) -> dict | None:
    """The package from the home's running `mabillon serve`, or None when there is none."""
    from tasks.store.serve_state import read_serve_state

    state = read_serve_state(settings.manifests)
    if state is None or not state.query_url or state.query_key is None:
        return None
    import httpx

    from flows.query_service import ServiceRefused, ask_service

    try:
        package = ask_service(state.query_url, state.query_key.get_secret_value(), request)
        log.info("answered by the warm query service of mabillon serve (pid %s)", state.pid)
        return package
    except httpx.TransportError as exc:
        log.info("serve's query service did not answer (%s); answering here", exc)
        return None
    except ServiceRefused as refused:
        p = refused.payload
        raise CliError(p.get("error", "refused"), Exit(int(p.get("code", 1))), p.get("hint")) from None


def answered_here(settings: MabillonSettings, request: dict) -> dict:
    from flows.answer import AskParams, answer
    from flows.cli.release import serving_or_named
    from tasks.access.principals import resolve_principal
    from tasks.store.layout import StoreLayout

    # nothing serving, an unknown generation: said before a model is loaded
    serving_or_named(StoreLayout.from_settings(settings), request["generation"])
    params = AskParams.model_validate(request)
    return answer(settings, params, resolve_principal(settings, params.principal)).model_dump(mode="json")
