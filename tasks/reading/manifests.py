"""IIIF Presentation 3 manifests, built with iiif-prezi3 (its pydantic models validate each part).

A revision's manifest: one canvas per page, painted by that page's image service; the lineage
(source, revision, digest, parser, generation) as metadata; one annotation page per canvas with
a box per chunk. A query's manifest: the canvases its visible citations are on, each with one
annotation per citation over the cited words.
"""
from __future__ import annotations

import json

from iiif_prezi3 import Annotation, Manifest, ServiceV3

from schemas.query import QueryRecord
from tasks.reading.catalog import RevisionInfo
from tasks.reading.links import Links
from tasks.reading.page_image import Canvas
from tasks.reading.room import ReadingRoom, Visible
from tasks.reading.views import EvidenceView, room_canvas
from tasks.reading.words import union

LANGUAGE = "fr"  # the corpora are French; labels of ours are "none" (identifiers, numbers)


def _none(text: str) -> dict:
    return {"none": [text]}


def _xywh(box) -> str:
    x0, y0, x1, y1 = box
    return f"{int(x0)},{int(y0)},{max(1, round(x1 - x0))},{max(1, round(y1 - y0))}"


def _canvas(manifest: Manifest, room: ReadingRoom, links: Links, revision: RevisionInfo,
            page_no: int, canvas: Canvas, label: str):
    """A canvas painted by the page's image service at its full size."""
    made = manifest.make_canvas(id=links.canvas(revision.revision_id, page_no), label=_none(label),
                                width=canvas.width, height=canvas.height)
    w, h = room.max_size(canvas)
    page = made.add_image(
        image_url=links.image(revision.revision_id, page_no),
        anno_id=f"{links.canvas(revision.revision_id, page_no)}/painting",
        anno_page_id=f"{links.canvas(revision.revision_id, page_no)}/page", format="image/jpeg",
        width=w, height=h)
    page.items[0].body.add_service(ServiceV3(
        id=links.image_service(revision.revision_id, page_no), type="ImageService3", profile="level1"))
    return made


def lineage_metadata(manifest: Manifest, revision: RevisionInfo, generation: str,
                     parsers: list[str]) -> None:
    for label, value in (("document", revision.doc_id), ("source", revision.source_id),
                         ("source URI", revision.uri), ("revision", revision.revision_id),
                         ("sha256", revision.digest), ("media type", revision.media_type),
                         ("acquired", revision.acquired_at), ("parser", ", ".join(parsers)),
                         ("generation", generation), ("corpus", revision.corpus or ""),
                         ("date", revision.date or "")):
        if value:
            manifest.add_metadata(label={"en": [label]}, value=_none(value))


def revision_manifest(room: ReadingRoom, view: Visible, links: Links, revision: RevisionInfo) -> dict:
    catalog = view.snapshot.catalog
    pages = catalog.pages.get(revision.revision_id, [])
    manifest = Manifest(id=links.manifest(revision.revision_id),
                        label={LANGUAGE: [revision.title or revision.doc_id]})
    lineage_metadata(manifest, revision, catalog.generation,
                     sorted({f"{p.parser} {p.parser_version}" for p in pages}))
    chunks = catalog.chunks(revision.revision_id)
    for page in pages:
        canvas = room_canvas(room, room.page_source(view, revision, page.page_no))
        if canvas is None:
            continue
        made = _canvas(manifest, room, links, revision, page.page_no, canvas, f"p. {page.page_no}")
        anno_page = links.annotation_page(revision.revision_id, f"p{page.page_no}/chunks")
        for chunk in chunks:
            bbox = chunk.bbox_on(page.page_no)
            if not bbox:
                continue
            raw = catalog.raw_text(revision.revision_id)[chunk.char_start:chunk.char_end]
            made.add_annotation(Annotation(
                id=f"{anno_page}/{chunk.ordinal}", type="Annotation", motivation="commenting",
                body={"type": "TextualBody", "format": "text/plain", "language": LANGUAGE,
                      "value": f"chunk {chunk.ordinal} ({chunk.chunk_id}), characters "
                               f"{chunk.char_start}–{chunk.char_end}: {raw}"},
                target=f"{made.id}#xywh={_xywh(canvas.to_pixels(bbox))}"), anno_page_id=anno_page)
    return as_json(manifest)


def query_manifest(room: ReadingRoom, view: Visible, links: Links, record: QueryRecord,
                   evidence: EvidenceView) -> dict:
    """The pages a query's visible citations are on, one annotation per citation."""
    catalog = view.snapshot.catalog
    manifest = Manifest(id=links.query_manifest(record.query_id),
                        label={LANGUAGE: [record.question.question]},
                        summary=_none(f"query {record.query_id}, generation {record.generation}"))
    canvases: dict[tuple[str, int], object] = {}
    for doc in evidence.documents:
        if doc.state != "shown":
            continue
        revision = catalog.revisions[doc.current_revision]
        for n, citation in enumerate(c for c in doc.citations if c.kind == "image"):
            key = (revision.revision_id, citation.page_no)
            if key not in canvases:
                canvas = room_canvas(room, room.page_source(view, revision, citation.page_no))
                canvases[key] = _canvas(manifest, room, links, revision, citation.page_no, canvas,
                                        f"{doc.doc_id}, p. {citation.page_no}")
            made = canvases[key]
            box = union([(citation.crop.x + r.x, citation.crop.y + r.y, citation.crop.x + r.x + r.w,
                          citation.crop.y + r.y + r.h) for r in citation.words])
            if box is None:
                continue
            why = f" — {doc.rationales[0]}" if doc.rationales else ""
            anno_page = links.annotation_page(f"query-{record.query_id}", "citations")
            made.add_annotation(Annotation(
                id=f"{anno_page}/{doc.rank}-{n}", type="Annotation", motivation="highlighting",
                body={"type": "TextualBody", "format": "text/plain", "language": LANGUAGE,
                      "value": f"#{doc.rank} {doc.doc_id} ({doc.status}){why}: {citation.cited_text}"},
                target=f"{made.id}#xywh={_xywh(box)}"), anno_page_id=anno_page)
    return as_json(manifest)


def as_json(manifest: Manifest) -> dict:
    return json.loads(manifest.json())
