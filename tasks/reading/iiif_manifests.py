"""IIIF Presentation 3 manifests, built with iiif-prezi3 (its pydantic models validate each part).

A revision's manifest: one canvas per page, painted by that page's image service; the lineage
(source, revision, digest, parser, generation) as metadata; one annotation page per canvas with
a box per chunk. A query's manifest: the canvases its visible citations are on, each with one
`commenting` annotation per citation over the cited words, its body the rank, the document and
the rationale — a viewer lists it (Mirador lists `commenting`, not `highlighting`).

Every manifest has at least one canvas (Presentation 3 requires it): pages without geometry
(text, HTML, DOCX, records) get none, and a revision or a query with no canvas at all answers
404 with words, and no page links to it (tasks/reading/views.py). An invented "text canvas"
would only give a viewer an empty window to show. An ALTO page delivered without its image has
a canvas of the ALTO page's size, painted by the library's image service when the delivery
names one (revision metadata `page_images`), else by nothing: its boxes still show where the
words are.
"""
from __future__ import annotations

import json

from iiif_prezi3 import Annotation, Manifest, ServiceV3

from schemas.query import QueryRecord
from tasks.reading.catalog import RevisionInfo
from tasks.reading.links import Links, xywh
from tasks.reading.room import NotFound, PageFace, ReadingRoom, Visible
from tasks.reading.views import EvidenceView
from tasks.reading.wording import plain_why
from tasks.reading.words import union

LANGUAGE = "fr"  # the corpora are French; labels of ours are "none" (identifiers, numbers)


def _none(text: str) -> dict:
    return {"none": [text]}


class NoCanvas(NotFound):
    """Nothing here has a page to show: no manifest (Presentation 3 requires a canvas)."""


def _canvas(manifest: Manifest, room: ReadingRoom, links: Links, revision: RevisionInfo,
            page_no: int, face: PageFace, label: str):
    """A canvas of the page's size, painted by this room's image service at its full size, by
    the library's image service, or (ALTO alone) by nothing."""
    canvas = face.canvas
    canvas_id = links.canvas(revision.revision_id, page_no)
    made = manifest.make_canvas(id=canvas_id, label=_none(label), width=canvas.width,
                                height=canvas.height)
    if face.source is not None:
        w, h = room.max_size(canvas)
        page = made.add_image(image_url=links.image(revision.revision_id, page_no),
                              anno_id=f"{canvas_id}/painting", anno_page_id=f"{canvas_id}/page",
                              format="image/jpeg", width=w, height=h)
        page.items[0].body.add_service(ServiceV3(
            id=links.image_service(revision.revision_id, page_no), type="ImageService3",
            profile="level2"))
    elif face.service is not None:
        page = made.add_image(image_url=f"{face.service}/full/max/0/default.jpg",
                              anno_id=f"{canvas_id}/painting", anno_page_id=f"{canvas_id}/page",
                              format="image/jpeg", width=canvas.width, height=canvas.height)
        # Gallica's image services speak Image API 2; a viewer reads the version from info.json
        page.items[0].body.add_service(ServiceV3(id=face.service, type="ImageService2",
                                                 profile="level1"))
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
        face = room.face(view, revision, page.page_no)
        if face is None:
            continue
        canvas = face.canvas
        made = _canvas(manifest, room, links, revision, page.page_no, face, f"p. {page.page_no}")
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
                target=f"{made.id}#xywh={xywh(canvas.to_pixels(bbox))}"), anno_page_id=anno_page)
    if not manifest.items:
        raise NoCanvas(f"{revision.doc_id} has no page images: it has no IIIF manifest")
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
        for n, citation in enumerate(c for c in doc.citations if c.kind != "text"):
            key = (revision.revision_id, citation.page_no)
            if key not in canvases:
                face = room.face(view, revision, citation.page_no)
                if face is None:
                    continue
                canvases[key] = _canvas(manifest, room, links, revision, citation.page_no, face,
                                        f"{doc.doc_id}, p. {citation.page_no}")
            made = canvases[key]
            box = union([(citation.crop.x + r.x, citation.crop.y + r.y, citation.crop.x + r.x + r.w,
                          citation.crop.y + r.y + r.h) for r in citation.words])
            if box is None:
                continue
            said = plain_why(doc.rationales, doc.confirmations)  # the reader's words, as in the room
            why = f" — {said}" if said else ""
            anno_page = links.annotation_page(f"query-{record.query_id}", "citations")
            # commenting: a viewer lists it beside the box it draws (highlighting it does not)
            made.add_annotation(Annotation(
                id=f"{anno_page}/{doc.rank}-{n}", type="Annotation", motivation="commenting",
                body={"type": "TextualBody", "format": "text/plain", "language": LANGUAGE,
                      "value": f"#{doc.rank} {doc.title or doc.doc_id}{why} : « {citation.cited_text} »"},
                target=f"{made.id}#xywh={xywh(box)}"), anno_page_id=anno_page)
    if not manifest.items:
        raise NoCanvas(f"query {record.query_id} cites no page image: it has no IIIF manifest")
    return as_json(manifest)


def as_json(manifest: Manifest) -> dict:
    return json.loads(manifest.json())
