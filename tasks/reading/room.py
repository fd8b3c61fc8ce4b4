"""The reading room's work, behind its HTTP layer: every lookup takes the viewer's principal and
answers only from what that principal may see now, or raises NotFound — the same NotFound for
a resource that does not exist and one the viewer may not read.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime

from schemas.query import QueryRecord
from schemas.retrieval import Principal
from schemas.settings import MabillonSettings
from tasks.access.principals import DEFAULT_PRINCIPAL
from tasks.reading.access import ServingState, Snapshot
from tasks.reading.catalog import ALTO_MEDIA_TYPE, PageInfo, RevisionInfo
from tasks.reading.image_request import (FEATURES, FORMATS, QUALITIES, ImageRequest,
                                         parse_image_request, parse_size)
from tasks.reading.page_image import Canvas, PageRenderer, PageSource, alto_partner, canvas_of, page_source
from tasks.reading.words import WordBox, page_words
from tasks.store.blobs import read_blob
from tasks.store.layout import StoreLayout
from tasks.store.query_records import QueryIndex, QueryListing, read_query_record

log = logging.getLogger(__name__)


class NotFound(LookupError):
    """Nothing the viewer may see answers to this address."""


@dataclass(frozen=True)
class Visible:
    """One request's view: the snapshot and what the viewer may see in it."""

    snapshot: Snapshot
    revisions: frozenset[str]
    principal: Principal

    def revision(self, revision_id: str) -> RevisionInfo:
        catalog = self.snapshot.catalog
        if catalog is None or revision_id not in self.revisions:
            raise NotFound(revision_id)
        return catalog.revisions[revision_id]

    def current(self, doc_id: str) -> RevisionInfo:
        catalog = self.snapshot.catalog
        revision_id = catalog.current.get(doc_id) if catalog else None
        if revision_id is None:
            raise NotFound(doc_id)
        return self.revision(revision_id)


_PAGE_NO = re.compile(r"^[0-9]{1,6}$")  # ASCII digits: str.isdigit() also takes '³' and '٣'


@dataclass(frozen=True)
class PageFace:
    """What a viewer is shown of a page: its canvas, and what paints it — this room's pixels
    (`source`), a library's IIIF Image service named by the delivery (`service`: ALTO without
    its image), or nothing (ALTO alone: the words at their places, on a page-shaped view)."""

    canvas: Canvas
    source: PageSource | None = None
    service: str | None = None


def parse_image_id(image_id: str) -> tuple[str, int]:
    revision_id, sep, page = image_id.rpartition("-p")
    if not sep or not revision_id or not _PAGE_NO.fullmatch(page):
        raise NotFound(image_id)
    return revision_id, int(page)


class ReadingRoom:
    def __init__(self, settings: MabillonSettings, layout: StoreLayout | None = None):
        self.settings = settings
        self.layout = layout or StoreLayout.from_settings(settings)
        self.state = ServingState(self.layout)
        rr = settings.reading_room
        self.renderer = PageRenderer(self.layout, rr.pdf_dpi, rr.cache_mb * 1024 * 1024,
                                     rr.max_render_pixels)
        self.queries = QueryIndex(self.layout)
        self._last_state: tuple | None = None

    # access -------------------------------------------------------------------------------------
    def visible(self, principal: Principal, as_of: datetime | None = None) -> Visible:
        """What the viewer may see in the generation routed to them, now or at `as_of` (already
        resolved and allowed: tasks.access.validity.resolve_as_of)."""
        snapshot = self.state.snapshot(principal)
        if self._last_state != self.state.version():
            # a deletion or a switch: cached pixels of what no route serves any more are dropped
            self._last_state = self.state.version()
            self.renderer.forget(self.state.live_revisions())
        return Visible(snapshot, snapshot.visible(principal, as_of), principal)

    def page_source(self, view: Visible, revision: RevisionInfo, page_no: int) -> PageSource | None:
        partner = None
        if revision.media_type == ALTO_MEDIA_TYPE:
            found = alto_partner(self.layout, view.snapshot.catalog, revision)
            # the image is served only to whoever may see it in its own right
            partner = found if found is not None and found.revision_id in view.revisions else None
        return page_source(self.layout, view.snapshot.catalog, revision, page_no, partner)

    def face(self, view: Visible, revision: RevisionInfo, page_no: int) -> PageFace | None:
        """None for pages without geometry (text, HTML, DOCX, records): they get no canvas."""
        source = self.page_source(view, revision, page_no)
        if source is not None:
            canvas = canvas_of(source, self.settings.reading_room.pdf_dpi)
            return PageFace(canvas, source) if canvas is not None else None
        page = view.snapshot.catalog.page(revision.revision_id, page_no)
        if revision.media_type != ALTO_MEDIA_TYPE or page is None or not page.width or not page.height:
            return None
        # the canvas has the ALTO page's own size, so its boxes need no scaling
        canvas = Canvas(width=max(1, round(page.width)), height=max(1, round(page.height)),
                        scale_x=1.0, scale_y=1.0)
        return PageFace(canvas, service=revision.page_image_service(page_no))

    def image_page(self, view: Visible, image_id: str) -> tuple[PageSource, Canvas]:
        revision_id, page_no = parse_image_id(image_id)
        revision = view.revision(revision_id)
        source = self.page_source(view, revision, page_no)
        canvas = canvas_of(source, self.settings.reading_room.pdf_dpi) if source else None
        if source is None or canvas is None:
            raise NotFound(image_id)
        return source, canvas

    # IIIF Image API ---------------------------------------------------------------------------
    def image(self, principal: Principal, image_id: str, region: str, size: str, rotation: str,
              quality_format: str, as_of: datetime | None = None) -> tuple[bytes, str, str]:
        """Encoded pixels, their media type and the request's canonical path (for the `Link`
        header). Authorization comes first, so a request for what the viewer may not see is
        NotFound whatever its parameters; then ImageRequestError (400, 501) for a request this
        image cannot answer."""
        source, canvas = self.image_page(self.visible(principal, as_of), image_id)
        request = parse_image_request(region, size, rotation, quality_format, canvas.width,
                                      canvas.height, self.settings.reading_room.max_pixels)
        canonical = request.canonical(canvas.width, canvas.height, self.max_size(canvas))
        return self.renderer.response(source, canvas, request), request.media_type, canonical

    def restricted(self, view: Visible, revision_id: str) -> bool:
        """Whether the anonymous reader cannot see this revision (IIIF auth services apply)."""
        from tasks.access.principals import default_principal

        return revision_id not in view.snapshot.visible(default_principal(self.settings))

    def info(self, principal: Principal, image_id: str, service_id: str,
             as_of: datetime | None = None, base: str = "") -> dict:
        from tasks.reading.iiif_auth import probe_service

        view = self.visible(principal, as_of)
        _, canvas = self.image_page(view, image_id)
        max_pixels = self.settings.reading_room.max_pixels
        info = {
            "@context": "http://iiif.io/api/image/3/context.json",
            "id": service_id, "type": "ImageService3", "protocol": "http://iiif.io/api/image",
            "profile": "level2", "width": canvas.width, "height": canvas.height,
            "maxArea": max_pixels,
            "sizes": thumbnail_sizes(canvas, max_pixels),
            "extraFormats": [f for f in FORMATS if f != "jpg"], "preferredFormats": ["jpg"],
            "extraQualities": [q for q in QUALITIES if q != "default"],
            "extraFeatures": FEATURES,
        }
        if self.restricted(view, parse_image_id(image_id)[0]):
            info["service"] = [probe_service(base, image_id)]
        return info

    def max_size(self, canvas: Canvas) -> tuple[int, int]:
        from tasks.reading.image_request import Box

        return parse_size("max", Box(0, 0, canvas.width, canvas.height),
                          self.settings.reading_room.max_pixels)

    # lookups for pages ------------------------------------------------------------------------
    def words(self, revision: RevisionInfo, page: PageInfo, catalog) -> list[WordBox]:
        elements = catalog.elements(revision.revision_id).get(page.page_no, [])
        blob = None
        if not any(e.kind == "word" for e in elements) and revision.media_type == "application/pdf":
            blob = read_blob(self.layout, revision.digest)
        return page_words(page, elements, revision.media_type, blob)

    def record(self, principal: Principal, query_id: str) -> QueryRecord:
        """A query record, only to the principal who asked it."""
        record = read_query_record(self.layout, query_id)
        if record is None or not asked_by(record, principal):
            raise NotFound(query_id)
        return record

    def records(self, principal: Principal, limit: int = 100) -> list[QueryListing]:
        """The principal's own questions, newest first. Anonymous questions (the default
        principal: every visitor without a token, and the CLI's asks without --principal) are
        listed to no one: each is reachable only by its unguessable link."""
        if principal.principal_id == DEFAULT_PRINCIPAL:
            return []
        out = []
        for listing in self.queries.listings():
            if listing.principal_id == principal.principal_id and listing.tenant == principal.tenant:
                out.append(listing)
                if len(out) >= limit:
                    break
        return out


def asked_by(record: QueryRecord, principal: Principal) -> bool:
    asker = record.principal  # a record that names no asker is shown to no one
    return (asker is not None and asker.principal_id == principal.principal_id
            and asker.tenant == principal.tenant)


def thumbnail_sizes(canvas: Canvas, max_pixels: int) -> list[dict]:
    """A few sizes a client may ask for by exact width and height (whole image, halving)."""
    from tasks.reading.image_request import Box

    w, h = parse_size("max", Box(0, 0, canvas.width, canvas.height), max_pixels)
    sizes = []
    while w >= 64 and h >= 64 and len(sizes) < 5:
        sizes.append({"width": w, "height": h})
        w, h = round(w / 2), round(h / 2)
    return list(reversed(sizes))
