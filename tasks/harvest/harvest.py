"""A harvest: find the issues a request names, fetch each one's answers, write its package folder.

Each issue is fetched on its own: OAIRecord (Dublin Core), Pagination (views and printed page
numbers), the IIIF manifest (image services), Toc (optional) and the ALTO of every view. An
issue whose answers cannot be had (a server error or a malformed answer after the bounded
retries) is quarantined with its reason, and the harvest goes on with the next. Discovery
(SRU, Issues) failing fails the harvest: there is nothing to go on with.

Everything lives under the home's `harvest/` folder: `cache/` (every answer, content-addressed)
and `packages/<ark name>/` (the folders handed to the release).
"""
from __future__ import annotations

import contextlib
import fcntl
import logging
from collections.abc import Callable
from datetime import date
from pathlib import Path

from schemas.harvest import GallicaSettings, HarvestedIssue, HarvestReport, HarvestRequest, IssueRef, \
    QuarantinedIssue, ark_name
from tasks.harvest import gallica
from tasks.harvest.cache import FetchCache
from tasks.harvest.client import HarvestFailure, PoliteClient
from tasks.harvest.package import IssuePackage, write_package

log = logging.getLogger(__name__)


def harvest_root(home: Path) -> Path:
    return home / "harvest"


@contextlib.contextmanager
def one_harvest_at_a_time(root: Path):
    """Hold the home's harvest lock (an OS file lock: the kernel lets it go when its holder dies,
    however it dies). Two harvests of one home (the nightly deployment and a command line) then
    never ask Gallica at the same time, which would double the rate, nor write one package
    folder together."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("another harvest of this home is running; waiting for it to finish")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def discover(request: HarvestRequest, client: PoliteClient, page_size: int) -> list[IssueRef]:
    """The issues the request names, in the order the services list them, each once."""
    if request.sru_query is not None:
        found = sru_issues(request.sru_query, client, page_size)
    elif request.is_title:
        found = []
        for year in range(request.date_from.year, request.date_to.year + 1):
            # a past year's list is settled: kept; this year's grows, so it is asked again
            answer = client.fetch("/services/Issues", gallica.issues_params(request.ark, year),
                                  check=gallica.parse_issues, use_cache=year < date.today().year)
            found += [i for i in gallica.parse_issues(answer)
                      if i.date is None or request.date_from <= i.date <= request.date_to]
    else:
        found = [IssueRef(ark=request.ark)]
    seen: set[str] = set()
    return [i for i in found if not (i.ark in seen or seen.add(i.ark))]


def sru_issues(query: str, client: PoliteClient, page_size: int) -> list[IssueRef]:
    # A search answers what Gallica holds now: asked again on every run, never cached.
    found, start = [], 1
    while True:
        answer = client.fetch("/SRU", gallica.sru_params(query, start, page_size),
                              check=gallica.parse_sru, use_cache=False)
        total, page = gallica.parse_sru(answer)
        found += page
        start += page_size
        if start > total or not page:
            return found


def fetch_issue(ref: IssueRef, client: PoliteClient) -> IssuePackage:
    """Every answer one issue's package is made of (from the cache where fetched before)."""
    name = ark_name(ref.ark)
    record = gallica.parse_oai_record(client.fetch("/services/OAIRecord", {"ark": name},
                                                   check=gallica.parse_oai_record))
    views = gallica.parse_pagination(client.fetch("/services/Pagination", {"ark": name},
                                                  check=gallica.parse_pagination))
    manifest = client.fetch(gallica.manifest_path(ref.ark), check=gallica.parse_manifest_services, optional=True)
    toc = client.fetch("/services/Toc", {"ark": name}, check=gallica.check_xml, optional=True)
    alto = {v.order: client.fetch("/RequestDigitalElement", gallica.alto_params(ref.ark, v.order),
                                  check=gallica.check_alto) for v in views}
    if record.date is None and ref.date is not None:
        record.date = ref.date.isoformat()
    return IssuePackage(ark=ref.ark, title_ark=gallica.title_ark_of(record), record=record, views=views,
                        alto=alto, toc=toc or None,
                        image_services=gallica.parse_manifest_services(manifest) if manifest else {})


def harvest(request: HarvestRequest, settings: GallicaSettings, home: Path, user_agent: str,
            on_issue: Callable[[int, int, HarvestedIssue | QuarantinedIssue], None] | None = None,
            sleep: Callable[[float], None] | None = None) -> HarvestReport:
    """Fetch every issue the request names into a package folder under the home; the report
    names the folders and the issues quarantined with their reasons."""
    root = harvest_root(home)
    report = HarvestReport(request=request)
    extra = {"sleep": sleep} if sleep else {}
    with one_harvest_at_a_time(root), \
            PoliteClient(settings, FetchCache(root / "cache"), user_agent, **extra) as client:
        try:
            issues = discover(request, client, settings.sru_page_size)
        finally:
            report.requests, report.from_cache = client.requests, client.cached
        log.info("harvest %s: %d issue(s)", request.describe(), len(issues))
        for n, ref in enumerate(issues, 1):
            before = (client.requests, client.cached)
            outcome: HarvestedIssue | QuarantinedIssue
            try:
                package = fetch_issue(ref, client)
                folder = root / "packages" / ark_name(ref.ark)
                write_package(package, folder)
                outcome = HarvestedIssue(
                    ark=ref.ark, folder=str(folder), date=_date(package.record.date) or ref.date,
                    title=package.record.title, pages=len(package.views),
                    fetched=client.requests - before[0], cached=client.cached - before[1])
                report.issues.append(outcome)
            except HarvestFailure as exc:
                outcome = QuarantinedIssue(ark=ref.ark, reason=exc.reason)
                report.quarantined.append(outcome)
                log.warning("harvest quarantined %s: %s", ref.ark, exc.reason)
            except ValueError as exc:  # an answer kept earlier that no longer reads (cannot be fixed by asking)
                outcome = QuarantinedIssue(ark=ref.ark, reason=f"unreadable answer: {exc}")
                report.quarantined.append(outcome)
            report.requests, report.from_cache = client.requests, client.cached
            if on_issue is not None:
                on_issue(n, len(issues), outcome)
    return report


def _date(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text[:10]) if text else None
    except ValueError:
        return None
