"""`mabillon harvest`: fetch Gallica issues into package folders in the home (no release), and
the harvesting step of `mabillon ingest` when its inputs name Gallica references.

Progress goes to stderr, one line an issue; the command's own answer to stdout.
"""
from __future__ import annotations

import argparse
import sys
from datetime import date

from flows.cli.errors import CliError, Exit
from flows.cli.main import add_command, emit
from schemas.harvest import HarvestReport, HarvestRequest, ark_name, is_gallica_reference
from schemas.settings import MabillonSettings
from tasks.markup import visible


def add_date_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="date_from", type=date.fromisoformat, metavar="YYYY-MM-DD",
                   help="first issue date, with a title ARK (ark:/12148/cb…)")
    p.add_argument("--to", dest="date_to", type=date.fromisoformat, metavar="YYYY-MM-DD",
                   help="last issue date, with a title ARK")


def register(sub, common) -> None:
    p = add_command(sub, common, "harvest", "fetch newspaper issues from Gallica into package folders "
                    "in the home, politely and resumably (`mabillon ingest REF` also publishes them)",
                    "mabillon harvest ark:/12148/cb32779904b --from 1887-01-01 --to 1887-12-31")
    p.add_argument("references", nargs="+", metavar="REF",
                   help="an issue ARK (ark:/12148/bpt6k…), a title ARK with --from/--to or as "
                        "ark:/12148/cb…/date1887, a gallica.bnf.fr link, or sru:CQL-QUERY")
    add_date_options(p)
    p.set_defaults(func=cmd_harvest)


def requests_of(references: list[str], date_from: date | None, date_to: date | None) -> list[HarvestRequest]:
    try:
        # the dates go with the title ARKs among the references
        return [HarvestRequest.from_reference(r, *((date_from, date_to) if is_title_reference(r) else (None, None)))
                for r in references]
    except ValueError as exc:  # pydantic's ValidationError is one
        message = getattr(exc, "errors", None)
        text = message()[0]["msg"].removeprefix("Value error, ") if callable(message) else str(exc)
        raise CliError(text, Exit.USAGE, "see: mabillon harvest --help") from None


def is_title_reference(text: str) -> bool:
    return not text.startswith("sru:") and ark_name(text).startswith("cb")


def progress_line(n: int, total: int, outcome) -> None:
    if hasattr(outcome, "reason"):
        line = f"harvest {n}/{total} {outcome.ark}: quarantined: {outcome.reason}"
    else:
        line = (f"harvest {n}/{total} {outcome.ark} {outcome.date or ''}: {outcome.pages} pages "
                f"({outcome.fetched} fetched, {outcome.cached} from the cache)")
    sys.stderr.write(visible(line) + "\n")
    sys.stderr.flush()


def run_harvests(requests: list[HarvestRequest], settings: MabillonSettings) -> list[HarvestReport]:
    from tasks.harvest.client import HarvestFailure, user_agent
    from tasks.harvest.harvest import harvest

    reports = []
    for request in requests:
        sys.stderr.write(visible(f"harvest {request.describe()} from {settings.gallica.base_url}") + "\n")
        try:
            reports.append(harvest(request, settings.gallica, settings.home, user_agent(settings.gallica),
                                   on_issue=progress_line))
        except HarvestFailure as exc:
            raise CliError(f"Gallica could not list the issues of {request.describe()}: {exc.reason}",
                           Exit.UNAVAILABLE, "nothing was harvested for it; run the command again later") from None
    return reports


def report_lines(reports: list[HarvestReport]) -> list[str]:
    lines = []
    for r in reports:
        lines.append(f"harvested {len(r.issues)} issue(s) of {r.request.describe()}: {r.requests} requests "
                     f"to Gallica, {r.from_cache} answers from the cache")
        lines += [f"  {i.folder}" for i in r.issues]
        lines += [f"  quarantined {q.ark}: {q.reason}" for q in r.quarantined]
    return lines


def cmd_harvest(args: argparse.Namespace, settings: MabillonSettings) -> int:
    reports = run_harvests(requests_of(args.references, args.date_from, args.date_to), settings)
    emit(args, [r.model_dump(mode="json") for r in reports], "\n".join(report_lines(reports)))
    if all(not r.issues for r in reports) and any(r.quarantined for r in reports):
        raise CliError("every issue was quarantined; nothing was harvested", Exit.UNAVAILABLE)
    return 0


def harvest_references(args: argparse.Namespace, settings: MabillonSettings) -> tuple[list[str], list[HarvestReport]]:
    """`mabillon ingest`'s inputs with each Gallica reference replaced by the package folders
    harvested for it (the other inputs as given)."""
    references = [p for p in args.paths if is_gallica_reference(p)]
    if not references:
        if args.date_from or args.date_to:
            raise CliError("--from/--to go with a Gallica title ARK", Exit.USAGE)
        return args.paths, []
    reports = run_harvests(requests_of(references, args.date_from, args.date_to), settings)
    paths = [p for p in args.paths if not is_gallica_reference(p)]
    return paths + [folder for r in reports for folder in r.folders], reports
