"""An answer's or a document's references for one viewer, through the reading room's own views:
the same access as the evidence page and the document page (tasks/reading/room.py) — what the
viewer may not see now is NotFound, or left out of an answer's list as withdrawn."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from schemas.citation import Reference
from schemas.retrieval import Principal
from tasks.cite.references import document_reference, evidence_references
from tasks.reading.links import Links
from tasks.reading.room import ReadingRoom
from tasks.reading.views import evidence_view


def query_references(room: ReadingRoom, principal: Principal, query_id: str,
                     links_at: Callable[[datetime | None], Links],
                     at: Callable[[datetime | None], datetime | None] = lambda recorded: recorded,
                     rank: int | None = None) -> list[Reference]:
    """The references of the principal's own answer `query_id`, in ranked order (or only the
    one at `rank`), seen at the answer's as_of (or the time `at` chooses from it)."""
    record = room.record(principal, query_id)
    when = at(record.as_of)
    view, links = room.visible(principal, when), links_at(when)
    refs = evidence_references(evidence_view(room, view, links, record), view, links)
    return refs if rank is None else [r for r in refs if r.rank == rank]


def document_references(room: ReadingRoom, principal: Principal, doc_id: str, links: Links,
                        when: datetime | None = None) -> list[Reference]:
    view = room.visible(principal, when)
    return [document_reference(view.current(doc_id), view.snapshot.generation, links)]
