"""The parse stage: revisions → parse tasks on the flow's task runner → one document per revision.

A task parses a *unit*: one or more pieces, a piece being a whole revision or some pages of a
long scan. Pieces are packed so that a task carries enough work to be worth its own cost (a
Prefect task run on a Dask worker costs about 0.1-0.2 s), and so that every worker has some:
with the local runner a unit is about one page, on Dask `pages_per_task` pages. Prefect and
Dask schedule the units; a worker that dies is replaced and its unit run again elsewhere.

Every piece is read in the parser sandbox (tasks/ingest/sandbox.py), a child process of the
worker with limits, on both runners: what a parser refuses, fails on, crashes on ("parser
crashed: SIGSEGV") or exhausts is quarantined with the reason. Should a worker die all the same
(killed, out of memory outside the child), a unit whose worker died every time it ran is split
into its pieces, and a piece that still kills its worker is quarantined as "parser crashed". Pages are cached as they are parsed, documents when whole, so
a rerun after a crash resumes where it stopped.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from prefect.futures import as_completed

from schemas.generation import Parsed, Quarantined
from schemas.lineage import ParsedDocument, Revision
from schemas.settings import ParseSettings
from tasks.ingest.changes import ChangeSet
from tasks.ingest.crash_points import crash_point
from tasks.ingest.parse import is_paged, parse_key, refusal_key, textless_is_lasting, textless_reason
from tasks.ingest.parse.errors import ParseRefused
from tasks.ingest.sandbox import parse_untrusted
from tasks.progress import StageProgress
from tasks.store.blobs import read_blob
from tasks.store.cache import drop_parsed_pages, load_parsed, save_parsed
from tasks.store.layout import StoreLayout
from tasks.store.refusals import load_refusal, save_refusal
from tasks.task_wrapper import as_task, lost_worker

log = logging.getLogger(__name__)

# Cost of parsing a revision without pages (a record, a text file, ALTO, DOCX, HTML) against
# one page of OCR: records parse in well under a millisecond, DOCX through docling in ~0.1 s.
UNPAGED_COST = 0.05
OCR_PARSER_PREFIX = "tesseract"


@dataclass(frozen=True)
class ParsePiece:
    revision: Revision
    pages: tuple[int, ...] | None = None  # 1-based pages of a paged revision; None: all of it

    @property
    def cost(self) -> float:
        if self.pages is not None:
            return float(len(self.pages))
        return 1.0 if is_paged(self.revision.media_type) else UNPAGED_COST

    def label(self) -> str:
        if self.pages is None:
            return self.revision.uri
        first, last = self.pages[0], self.pages[-1]
        return f"{self.revision.uri} (page{'s' if last > first else ''} {first}" \
               f"{f'-{last}' if last > first else ''})"


@dataclass(frozen=True)
class PieceResult:
    piece: ParsePiece
    document: ParsedDocument | None  # None: refused
    refused: str | None = None
    ocr_pages: int = 0  # pages this piece read by OCR (not from the page cache)
    lasting: bool = True  # a refusal the same bytes would get again (ParseRefused.lasting)


@dataclass(frozen=True)
class FanOut:
    """How the parse stage spreads its work: over how many workers, in units of how many pages."""

    workers: int = 1
    pages_per_task: float = 1.0


# ---- planning (pure) ----------------------------------------------------------------------

def pieces_of(revision: Revision, pages: int) -> list[ParsePiece]:
    """A revision of several pages is parsed page by page; any other as a whole."""
    if pages > 1 and is_paged(revision.media_type):
        return [ParsePiece(revision, (n,)) for n in range(1, pages + 1)]
    return [ParsePiece(revision)]


def pack(pieces: Sequence[ParsePiece], pages_per_task: float, workers: int) -> list[list[ParsePiece]]:
    """Consecutive pieces grouped into units of about `pages_per_task` pages of work, smaller
    when that would leave fewer than two units per worker. Pages of one revision that land
    in one unit become one piece (one parser call, one read of the bytes)."""
    total = sum(p.cost for p in pieces)
    target = min(pages_per_task, total / (2 * max(1, workers))) if pieces else 0
    units: list[list[ParsePiece]] = []
    current: list[ParsePiece] = []
    cost = 0.0
    for piece in pieces:
        current.append(piece)
        cost += piece.cost
        if cost >= target:
            units.append(_merge_pages(current))
            current, cost = [], 0.0
    if current:
        units.append(_merge_pages(current))
    return units


def _merge_pages(unit: list[ParsePiece]) -> list[ParsePiece]:
    merged: list[ParsePiece] = []
    for piece in unit:
        last = merged[-1] if merged else None
        if last and piece.pages and last.pages and last.revision.revision_id == piece.revision.revision_id:
            merged[-1] = ParsePiece(piece.revision, last.pages + piece.pages)
        else:
            merged.append(piece)
    return merged


# ---- one unit (runs on a worker) ----------------------------------------------------------

def read_piece(data: bytes, piece: ParsePiece, pages: Sequence[int] | None,
               settings: ParseSettings) -> ParsedDocument:
    """The one call into the parsers: in the sandbox's child process, under settings.sandbox."""
    return parse_untrusted(data, piece.revision, settings, pages)


def parse_piece(piece: ParsePiece, layout: StoreLayout, settings: ParseSettings, key: str) -> PieceResult:
    rev = piece.revision
    cached = {n: load_parsed(layout, rev.revision_id, key, page=n) for n in piece.pages or ()}
    todo = [n for n, doc in cached.items() if doc is None]
    pages = [p for doc in cached.values() if doc is not None for p in doc.pages]
    if piece.pages is None or todo:
        data = read_blob(layout, rev.digest)  # a storage error fails the task: it is retried
        try:
            doc = read_piece(data, piece, todo if piece.pages is not None else None, settings)
        except ParseRefused as exc:
            return PieceResult(piece, None, str(exc), lasting=getattr(exc, "lasting", True))
        except Exception as exc:  # a parser bug on one file must not sink the batch
            log.exception("parser failed on %s", piece.label())
            return PieceResult(piece, None, f"parser error: {type(exc).__name__}: {exc}", lasting=False)
        if piece.pages is not None:
            for page in doc.pages:
                save_parsed(layout, ParsedDocument(revision_id=rev.revision_id, pages=[page]), key,
                            page=page.page_no)
        fresh_ocr = sum(p.parser.startswith(OCR_PARSER_PREFIX) for p in doc.pages)
        pages += doc.pages
    else:
        fresh_ocr = 0
    return PieceResult(piece, ParsedDocument(revision_id=rev.revision_id,
                                             pages=sorted(pages, key=lambda p: p.page_no)),
                       ocr_pages=fresh_ocr)


def parse_unit(unit: list[ParsePiece], layout: StoreLayout, settings: ParseSettings) -> list[PieceResult]:
    key = parse_key(settings.ocr)
    results = []
    for piece in unit:
        results.append(parse_piece(piece, layout, settings, key))
        crash_point(layout, "parse")  # test hook: a worker killed in the middle of a unit
    return results


parse_unit_task = as_task(parse_unit, "parse", reads_storage=True)


# ---- the stage (runs in the flow) ---------------------------------------------------------

def parse(work: ChangeSet, layout: StoreLayout, settings: ParseSettings, fan_out: FanOut) -> Parsed:
    """Documents of the run's revisions (from the cache, or parsed on the flow's task runner);
    bytes refused before under the same parsers and limits are refused again without parsing."""
    revisions, page_counts = work.to_process, work.pages
    key, refusals = parse_key(settings.ocr), refusal_key(settings)
    documents: dict[str, ParsedDocument] = {}
    todo: list[Revision] = []
    refused = list(work.quarantined)
    for rev in revisions:
        doc = load_parsed(layout, rev.revision_id, key)
        known = None if doc is not None else load_refusal(layout, refusals, rev.digest, rev.media_type)
        if doc is not None:
            documents[rev.revision_id] = doc
        elif known is not None:
            log.warning("quarantined %s: %s (refused before, not parsed again)", rev.uri, known.reason)
            refused.append(Quarantined(uri=rev.uri, digest=rev.digest, reason=(
                f"{known.reason} (the same bytes were refused on {known.at:%Y-%m-%d} under the same "
                "parsers and limits: not parsed again)")))
        else:
            todo.append(rev)
    pieces = [p for rev in todo for p in pieces_of(rev, page_counts.get(rev.revision_id, 1))]
    units = pack(pieces, fan_out.pages_per_task, fan_out.workers)
    results = run_units(units, layout, settings, StageProgress("parse", len(pieces), "page"))
    ocr_pages = 0
    for rev in todo:
        mine = [r for r in results if r.piece.revision.revision_id == rev.revision_id]
        ocr_pages += sum(r.ocr_pages for r in mine)
        failed = next((r for r in mine if r.refused), None)
        doc = None
        if failed is not None:
            reason, lasting = failed.refused, failed.lasting
        else:
            doc = ParsedDocument(revision_id=rev.revision_id,
                                 pages=sorted((p for r in mine for p in r.document.pages),
                                              key=lambda p: p.page_no))
            reason, lasting = textless_reason(doc), textless_is_lasting(doc)
        if reason is not None:
            log.warning("quarantined %s: %s", rev.uri, reason)
            refused.append(Quarantined(uri=rev.uri, reason=reason, digest=rev.digest))
            if lasting:
                save_refusal(layout, refusals, rev.digest, rev.media_type, reason, rev.uri)
            continue
        save_parsed(layout, doc, key)
        if page_counts.get(rev.revision_id, 1) > 1:
            drop_parsed_pages(layout, rev.revision_id, key, [p.page_no for p in doc.pages])
        documents[rev.revision_id] = doc
    return Parsed(documents=documents, quarantined=refused, ocr_pages=ocr_pages)


def run_units(units: list[list[ParsePiece]], layout: StoreLayout, settings: ParseSettings,
              progress: StageProgress) -> list[PieceResult]:
    """Submit every unit, gather the results as they come; a unit whose worker kept dying is
    split into its pieces and run again, and a piece that still kills its worker is refused."""
    results: list[PieceResult] = []
    with progress:
        pending = {parse_unit_task.submit(unit, layout, settings): unit for unit in units}
        while pending:
            again = {}
            for future in as_completed(list(pending)):
                unit = pending[future]
                try:
                    done = future.result()
                except Exception as exc:
                    if not lost_worker(exc):
                        raise  # storage failing after its retries, a bug: not the file's fault
                    mark_crashed(future, exc)
                    if len(unit) > 1:
                        log.warning("a worker died on a unit of %d pieces; each runs alone now", len(unit))
                        again.update({parse_unit_task.submit([p], layout, settings): [p] for p in unit})
                        continue
                    done = [crashed(unit[0], exc)]
                results.extend(done)
                progress.advance(sum(len(r.piece.pages or (1,)) for r in done))
            pending = again
    return results


def crashed(piece: ParsePiece, error: BaseException) -> PieceResult:
    log.error("parser crashed on %s: %s", piece.label(), error)
    return PieceResult(piece, None, "parser crashed: the worker process parsing it died every time "
                                    f"it was tried ({type(error).__name__}; killed by a signal or "
                                    "out of memory)", lasting=False)  # the machine's memory, maybe


def mark_crashed(future, error: BaseException) -> None:
    """The task run's worker died with it, so nobody reported its end: say so in the UI."""
    try:
        from prefect.client.orchestration import get_client
        from prefect.states import Crashed

        with get_client(sync_client=True) as client:
            client.set_task_run_state(future.task_run_id, Crashed(message=str(error)), force=True)
    except Exception as exc:  # the record is for people; the release goes on without it
        log.debug("could not mark task run %s crashed: %s", future.task_run_id, exc)
