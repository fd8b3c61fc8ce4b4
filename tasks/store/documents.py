"""The documents of a generation, for finding an id: a listing, a filter, and "did you mean".

Read from the generation's lineage snapshot (sources and chunks), never from the index, so the
listing costs one Parquet read and no model.
"""
from __future__ import annotations

import difflib
import unicodedata

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel

from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table

SOURCE_COLUMNS = ["doc_id", "corpus", "tenant", "groups", "current_revision_id"]


class DocumentRow(BaseModel):
    doc_id: str
    corpus: str | None
    date: str | None
    title: str | None
    tenant: str | None
    groups: list[str]
    chunks: int
    deleted: bool = False  # tombstoned: masked from every answer


def _fold(text: str | None) -> str:
    decomposed = unicodedata.normalize("NFKD", (text or "").casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def document_ids(layout: StoreLayout, generation: str) -> list[str]:
    return read_lineage_table(layout, generation, "sources", ["doc_id"])["doc_id"].to_pylist()


def list_documents(layout: StoreLayout, generation: str, corpus: str | None = None,
                   match: str | None = None, tombstoned: set[str] | None = None) -> list[DocumentRow]:
    """Documents of `generation`, by doc id; `match` is a case- and accent-blind substring of the
    id or the title; `corpus` an exact corpus name."""
    sources = read_lineage_table(layout, generation, "sources", SOURCE_COLUMNS)
    if corpus:
        sources = sources.filter(pc.equal(sources["corpus"], corpus))
    revisions = read_lineage_table(layout, generation, "revisions", ["revision_id", "date", "title"])
    described = {r: (d, t) for r, d, t in zip(revisions["revision_id"].to_pylist(),
                                               revisions["date"].to_pylist(),
                                               revisions["title"].to_pylist())}
    chunks = read_lineage_table(layout, generation, "chunks", ["revision_id"])
    per_revision = chunks.group_by("revision_id").aggregate([("revision_id", "count")])
    counts = dict(zip(per_revision["revision_id"].to_pylist(),
                      per_revision["revision_id_count"].to_pylist()))
    needle = _fold(match) if match else None
    tombstoned = tombstoned or set()
    rows = []
    for r in sources.to_pylist():
        date, title = described.get(r["current_revision_id"], (None, None))
        if needle and needle not in _fold(r["doc_id"]) and needle not in _fold(title):
            continue
        rows.append(DocumentRow(doc_id=r["doc_id"], corpus=r["corpus"], date=date, title=title,
                                tenant=r["tenant"], groups=list(r["groups"] or []),
                                chunks=counts.get(r["current_revision_id"], 0),
                                deleted=r["doc_id"] in tombstoned))
    return sorted(rows, key=lambda d: d.doc_id)


def corpora(layout: StoreLayout, generation: str) -> list[str]:
    table: pa.Table = read_lineage_table(layout, generation, "sources", ["corpus"])
    return sorted({c for c in table["corpus"].to_pylist() if c})


def did_you_mean(wanted: str, known: list[str], n: int = 3) -> list[str]:
    """The closest ids (edit similarity, those near the best only), then ids that contain what
    was typed."""
    close = difflib.get_close_matches(wanted, known, n=n, cutoff=0.6)
    if close:
        ratio = lambda k: difflib.SequenceMatcher(None, wanted, k).ratio()  # noqa: E731
        best = ratio(close[0])
        close = [k for k in close if ratio(k) >= best - 0.05]
    folded = _fold(wanted)
    contained = [k for k in known if folded and folded in _fold(k) and k not in close]
    return (close + contained)[:n]


def unknown_documents(layout: StoreLayout, doc_ids: list[str]) -> dict[str, list[str]]:
    """Ids the serving generation does not hold, each with the closest ids it does hold."""
    from tasks.store.routing import read_routing

    serving = read_routing(layout).serving
    known = document_ids(layout, serving) if serving else []
    held = set(known)
    return {d: did_you_mean(d, known) for d in doc_ids if d not in held}
