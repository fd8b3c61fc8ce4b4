"""What the evidence page and the document page show, as plain values the templates lay out.

Everything here comes from the serving generation as the viewer may see it now: a cited
document that was deleted or is no longer allowed is `withdrawn`, and nothing of it — text,
crop, boxes, rationale, identifiers — is carried into the view.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from schemas.query import EvidenceDocument, QueryRecord
from tasks.ops.redact import REDACTED
from tasks.reading.catalog import ChunkInfo, PageInfo, RevisionInfo
from tasks.reading.content_state import content_state, encode_content_state
from tasks.reading.links import Links, xywh
from tasks.reading.page_image import Canvas, canvas_of
from tasks.reading.room import NotFound, ReadingRoom, Visible
from tasks.reading.words import cited_words, page_range, union

CROP_DISPLAY_WIDTH = 900  # pixels of a citation crop as requested from the image service
PAGE_DISPLAY_WIDTH = 1000
CONTEXT_CHARS = 400  # text shown around a cited span of a text format


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    label: str = ""
    group: int = 0  # chunk ordinal (document page) or 0


@dataclass
class CitationView:
    chunk_id: str
    page_no: int | None
    char_start: int
    char_end: int
    cited_text: str
    kind: str  # "image" | "page-text" (ALTO without any image: words at their places) | "text"
    # image and page-text citations: the crop (canvas pixels), where it is fetched, the words
    crop: Rect | None = None
    crop_url: str | None = None  # None for page-text
    page_url: str | None = None
    words: list[Rect] = field(default_factory=list)  # the cited words, in crop pixels
    context_words: list[Rect] = field(default_factory=list)  # page-text: every word in the crop
    # where the cited words are, for references and viewers (tasks/reading/links.py, content_state.py)
    region: str | None = None  # x,y,w,h in canvas pixels: the union of the cited words
    region_url: str | None = None  # the page's image address with #xywh=region
    canvas_id: str | None = None
    content_state: str | None = None  # IIIF Content State 1.0, encoded for `iiif-content`
    viewer_url: str | None = None  # a IIIF viewer opened at the cited box
    # text citations: the span and its context
    before: str = ""
    after: str = ""


@dataclass
class DocumentEvidence:
    rank: int
    state: str  # "shown" | "withdrawn" | "superseded"
    status: str = ""  # accepted | held | retrieved
    doc_id: str = ""
    title: str | None = None
    corpus: str | None = None
    date: str | None = None
    revision: str | None = None
    digest: str | None = None
    confirmations: int = 0
    sub_questions: list[int] = field(default_factory=list)
    rationales: list[str] = field(default_factory=list)
    ranks: dict = field(default_factory=dict)
    document_url: str | None = None
    manifest_url: str | None = None
    citations: list[CitationView] = field(default_factory=list)
    current_revision: str | None = None


@dataclass
class EvidenceView:
    record: QueryRecord
    documents: list[DocumentEvidence]
    manifest_url: str | None


def crop_for(boxes: list[tuple[float, float, float, float]], canvas: Canvas) -> Rect:
    """The words' union with a margin, in whole pixels inside the canvas."""
    x0, y0, x1, y1 = union(boxes)
    margin = max(16, round(canvas.width * 0.03))
    x0, y0 = max(0, int(x0) - margin), max(0, int(y0) - margin)
    x1, y1 = min(canvas.width, int(x1 + 0.999) + margin), min(canvas.height, int(y1 + 0.999) + margin)
    return Rect(x0, y0, max(1, x1 - x0), max(1, y1 - y0))


def image_citation(room: ReadingRoom, view: Visible, links: Links, revision: RevisionInfo,
                   page: PageInfo, chunk_id: str, start: int, end: int,
                   fallback_bbox) -> CitationView | None:
    """The crop and the cited words of one page of a citation; None when the page has no
    canvas (no geometry at all)."""
    face = room.face(view, revision, page.page_no)
    local = page_range(page, start, end)
    if face is None or local is None:
        return None
    canvas = face.canvas
    page_words = room.words(revision, page, view.snapshot.catalog)
    words = cited_words(page_words, *local)
    boxes = [canvas.to_pixels(w.bbox) for w in words]
    if not boxes and fallback_bbox:
        boxes = [canvas.to_pixels(fallback_bbox)]
    cited = page.raw_text[local[0]:local[1]]
    if not boxes:  # no box recorded: the whole page, nothing highlighted
        crop, rects = Rect(0, 0, canvas.width, canvas.height), []
    else:
        crop = crop_for(boxes, canvas)
        labels = [w.text for w in words] or [""] * len(boxes)
        rects = [Rect(b[0] - crop.x, b[1] - crop.y, b[2] - b[0], b[3] - b[1], label=text)
                 for b, text in zip(boxes, labels)]
    width = min(CROP_DISPLAY_WIDTH, int(crop.w))
    crop_region = f"{int(crop.x)},{int(crop.y)},{int(crop.w)},{int(crop.h)}"
    citation = CitationView(
        chunk_id=chunk_id, page_no=page.page_no, char_start=start, char_end=end, cited_text=cited,
        kind="image", crop=crop, words=rects,
        page_url=f"{links.document(revision.doc_id)}#page-{page.page_no}",
        canvas_id=links.canvas(revision.revision_id, page.page_no))
    if face.source is not None:
        citation.crop_url = links.image(revision.revision_id, page.page_no, region=crop_region,
                                        size=f"{width},")
    elif face.service is not None:  # the library's own image of the page (ALTO units = its pixels)
        citation.crop_url = f"{face.service}/{crop_region}/{width},/0/default.jpg"
    else:
        citation.kind = "page-text"
        citation.context_words = [
            Rect(b[0] - crop.x, b[1] - crop.y, b[2] - b[0], b[3] - b[1], label=w.text)
            for w in page_words for b in [canvas.to_pixels(w.bbox)]
            if b[0] >= crop.x and b[1] >= crop.y and b[2] <= crop.x + crop.w and b[3] <= crop.y + crop.h]
    if boxes:
        citation.region = xywh(union(boxes))
        citation.region_url = (links.image_region(revision.revision_id, page.page_no, union(boxes))
                               if face.source is not None else
                               f"{face.service}#xywh={citation.region}" if face.service else None)
        state = content_state(links.manifest(revision.revision_id), citation.canvas_id, citation.region)
        citation.content_state = encode_content_state(state)
        citation.viewer_url = links.viewer(citation.content_state)
    return citation


def room_canvas(room: ReadingRoom, source) -> Canvas | None:
    return canvas_of(source, room.settings.reading_room.pdf_dpi) if source else None


def text_citation(raw: str, chunk_id: str, start: int, end: int, page_no: int | None) -> CitationView:
    start, end = max(0, start), min(len(raw), end)
    lo, hi = max(0, start - CONTEXT_CHARS), min(len(raw), end + CONTEXT_CHARS)
    return CitationView(chunk_id=chunk_id, page_no=page_no, char_start=start, char_end=end,
                        cited_text=raw[start:end], kind="text",
                        before=("…" if lo else "") + raw[lo:start],
                        after=raw[end:hi] + ("…" if hi < len(raw) else ""))


def citations_of(room: ReadingRoom, view: Visible, links: Links, revision: RevisionInfo,
                 doc: EvidenceDocument) -> list[CitationView]:
    catalog = view.snapshot.catalog
    pages = catalog.pages.get(revision.revision_id, [])
    raw = catalog.raw_text(revision.revision_id)
    out: list[CitationView] = []
    for span in doc.evidence:
        chunk = catalog.chunk(revision.revision_id, span.chunk_id)
        start, end = (chunk.char_start, chunk.char_end) if chunk else (span.char_start, span.char_end)
        shown = []
        for page in pages:
            if page_range(page, start, end) is None:
                continue
            bbox = chunk.bbox_on(page.page_no) if chunk else (span.bbox if span.page == page.page_no else None)
            citation = image_citation(room, view, links, revision, page, span.chunk_id, start, end, bbox)
            if citation is not None:
                shown.append(citation)
        out += shown or [text_citation(raw, span.chunk_id, start, end, span.page)]
    return out


def evidence_view(room: ReadingRoom, view: Visible, links: Links, record: QueryRecord) -> EvidenceView:
    documents = []
    for doc in record.documents:
        revision = None
        if doc.doc_id != REDACTED and doc.doc_id not in view.snapshot.tombstones:
            try:
                revision = view.current(doc.doc_id)
            except NotFound:
                revision = None
        if revision is None:
            documents.append(DocumentEvidence(rank=doc.rank, state="withdrawn"))
            continue
        shown = DocumentEvidence(
            rank=doc.rank, state="shown", status=doc.status, doc_id=doc.doc_id,
            title=revision.title, corpus=revision.corpus, date=revision.date,
            revision=doc.revision, digest=doc.digest, confirmations=doc.confirmations,
            sub_questions=doc.sub_questions, rationales=doc.rationales,
            ranks=doc.ranks.model_dump(), document_url=links.document(doc.doc_id),
            manifest_url=links.manifest(revision.revision_id) if has_canvas(room, view, revision) else None,
            current_revision=revision.revision_id)
        if doc.revision and doc.revision != revision.revision_id:
            shown.state = "superseded"  # the cited bytes no longer serve; the document does
        else:
            shown.citations = citations_of(room, view, links, revision, doc)
        documents.append(shown)
    # a manifest with no canvas is not a manifest (Presentation 3 §3): no link to one
    cites_a_page = any(c.kind != "text" for d in documents for c in d.citations)
    return EvidenceView(record=record, documents=documents,
                        manifest_url=links.query_manifest(record.query_id) if cites_a_page else None)


def has_canvas(room: ReadingRoom, view: Visible, revision: RevisionInfo) -> bool:
    """Whether any page of the revision has a canvas; text records have none, so they get no
    IIIF link at all (a viewer would show an empty window)."""
    return any(room.face(view, revision, p.page_no) is not None
               for p in view.snapshot.catalog.pages.get(revision.revision_id, []))


# ---- the document page: how this document was cut ------------------------------------------

@dataclass
class PageView:
    page: PageInfo
    image_url: str | None = None
    width: int = 0  # canvas pixels (the overlay's coordinate system)
    height: int = 0
    words: list[Rect] = field(default_factory=list)  # canvas pixels, grouped by chunk ordinal
    segments: list[tuple[str, int | None]] = field(default_factory=list)  # text formats


@dataclass
class DocumentView:
    revision: RevisionInfo
    generation: str
    parsers: list[str]
    pages: list[PageView]
    chunks: list[tuple[ChunkInfo, str]]  # with the chunk's raw text
    manifest_url: str | None


def chunk_at(chunks: list[ChunkInfo], starts: list[int], offset: int) -> ChunkInfo | None:
    i = bisect.bisect_right(starts, offset) - 1
    return chunks[i] if i >= 0 and chunks[i].char_start <= offset < chunks[i].char_end else None


def segments(raw: str, chunks: list[ChunkInfo]) -> list[tuple[str, int | None]]:
    """The raw text cut at chunk boundaries, each piece with the chunk it belongs to."""
    out, cursor = [], 0
    for c in chunks:
        if c.char_start > cursor:
            out.append((raw[cursor:c.char_start], None))
        start = max(cursor, c.char_start)
        if c.char_end > start:
            out.append((raw[start:c.char_end], c.ordinal))
            cursor = c.char_end
    if cursor < len(raw):
        out.append((raw[cursor:], None))
    return out


def document_view(room: ReadingRoom, view: Visible, links: Links, revision: RevisionInfo) -> DocumentView:
    catalog = view.snapshot.catalog
    chunks = catalog.chunks(revision.revision_id)
    starts = [c.char_start for c in chunks]
    raw = catalog.raw_text(revision.revision_id)
    pages, any_image = [], False
    for page in catalog.pages.get(revision.revision_id, []):
        source = room.page_source(view, revision, page.page_no)
        canvas = room_canvas(room, source)
        if canvas is None:
            page_chunks = [c for c in chunks if page_range(page, c.char_start, c.char_end)]
            local = [ChunkInfo(c.chunk_id, c.ordinal, c.char_start - page.offset,
                               c.char_end - page.offset, c.page_start, c.page_end, c.n_tokens,
                               c.spans) for c in page_chunks]
            pages.append(PageView(page=page, segments=segments(page.raw_text, local)))
            continue
        any_image = True
        rects = []
        for w in room.words(revision, page, catalog):
            chunk = chunk_at(chunks, starts, w.char_start + page.offset)
            if chunk is None:
                continue
            x0, y0, x1, y1 = canvas.to_pixels(w.bbox)
            rects.append(Rect(x0, y0, x1 - x0, y1 - y0, label=w.text, group=chunk.ordinal))
        width = min(PAGE_DISPLAY_WIDTH, canvas.width)
        pages.append(PageView(page=page, width=canvas.width, height=canvas.height, words=rects,
                              image_url=links.image(revision.revision_id, page.page_no,
                                                    size=f"{width},")))
    parsers = sorted({f"{p.parser} ({p.parser_version})" for p in catalog.pages.get(revision.revision_id, [])})
    return DocumentView(revision=revision, generation=catalog.generation, parsers=parsers,
                        pages=pages, chunks=[(c, raw[c.char_start:c.char_end]) for c in chunks],
                        manifest_url=links.manifest(revision.revision_id) if any_image or has_canvas(room, view, revision) else None)
