"""The reading room: an ASGI app over the serving generation (`mabillon reading-room`).

Pages a person reads (evidence of a query, a document and how it was cut, a question box) and
JSON a program reads (IIIF Image API 3 and Presentation 3, the evidence as JSON). Every request
resolves its viewer (tasks/reading/viewer.py) and is answered from what that viewer may see now
— or at the `?as_of=` the request names (an ISO 8601 date or time; a query's evidence at the
query's own as_of) — in the generation routed to them (tasks/reading/room.py): anything else
is the same 404 as what does not exist.

What another site's page may do here: read IIIF images and manifests (IIIF viewers live on other
origins), nothing else. No other address answers with CORS headers; a POST (sign-in, sign-out,
the question box, `POST /api/ask`) sent by a page of another origin is refused (403), and
`POST /api/ask` takes `application/json` only, which a page cannot send across origins without
a preflight this room does not grant. The sign-in cookie holds a random session id, never the
token (tasks/reading/sessions.py). Every malformed request is a 4xx that says what is wrong;
anything else that fails is logged with its traceback by this module's logger and answered 500.
"""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlsplit

from fastapi import FastAPI, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError
from starlette.middleware.cors import CORSMiddleware

from schemas.reading_room import MAX_ASK_BODY_BYTES, AskRequest
from schemas.retrieval import AccessDenied, Principal
from schemas.settings import MabillonSettings
from tasks.access.principals import DEFAULT_PRINCIPAL, default_principal, token_digest
from tasks.access.validity import AsOfAhead, InvalidAsOf, resolve_as_of
from tasks.reading import wording
from tasks.reading.image_request import ImageRequestError
from tasks.reading.links import Links
from tasks.reading.listing import ListFilter
from tasks.reading.iiif_manifests import NoCanvas, query_manifest, revision_manifest
from tasks.reading.reader_pages import document_title, documents_page, evidence_page
from tasks.reading.room import NotFound, ReadingRoom
from tasks.reading.sessions import SESSION_COOKIE, Sessions
from tasks.reading.viewer import resolve_viewer
from tasks.reading.views import document_view, evidence_view

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).resolve().parent / "templates" / "reading_room"
OLD_TOKEN_COOKIE = "mabillon_token"  # earlier versions kept the token itself in this cookie
SESSION_ENDED = "your sign-in has ended (or this room restarted): sign in again"
NOT_FOUND = "not found"
INTERNAL = "internal error: the reading room's log has the details"
IIIF_PREFIXES = ("/iiif/", "/at/")
JSON_LD = 'application/ld+json;profile="http://iiif.io/api/image/3/context.json"'
PRESENTATION_LD = 'application/ld+json;profile="http://iiif.io/api/presentation/3/context.json"'
# Responses depend on who asks: never kept by shared caches, revalidated by the browser.
PRIVATE = {"Cache-Control": "private, no-cache", "Vary": "Authorization, Cookie"}
IMAGE_PROFILE = "http://iiif.io/api/image/3/level2.json"
IIIF_HEADERS = {**PRIVATE, "Access-Control-Allow-Origin": "*", "Link": f'<{IMAGE_PROFILE}>;rel="profile"'}


class Refused(Exception):
    """A request this room will not carry out, with the status and the words to answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class IiifCors:
    """CORS for the IIIF services only (Mirador, the Universal Viewer on other origins send the
    bearer token themselves); every other address answers no CORS header at all."""

    def __init__(self, app):
        self.app = app
        self.cors = CORSMiddleware(app, allow_origins=["*"], allow_methods=["GET", "HEAD"],
                                   allow_headers=["Authorization"], allow_credentials=False)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith(IIIF_PREFIXES):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def _origin(url: str) -> tuple[str, str]:
    """(scheme://host[:port], host[:port]) of a URL or an Origin header, lower-cased; an
    unreadable one ("http://[") names no origin."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "", ""
    return f"{parts.scheme}://{parts.netloc}".lower(), parts.netloc.lower()


class SameOrigin:
    """A POST sent by a page of another origin is refused before any route sees it: the sign-in
    form (login CSRF), sign-out, the question box and `POST /api/ask`. A request with neither
    Origin nor Sec-Fetch-Site is not a browser's cross-site request (curl, scripts) and passes."""

    def __init__(self, app, settings: MabillonSettings):
        self.app = app
        rr = settings.reading_room
        self.allowed = {_origin(o)[0] for o in [*rr.allowed_origins, *([rr.url] if rr.url else [])]}

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            origin, site = headers.get("origin"), headers.get("sec-fetch-site")
            # its own pages: the host it was reached at, whatever the scheme (a TLS proxy in
            # front of a plain-HTTP room sees https in Origin and http in its own scope)
            own = headers.get("host", "").strip().lower()
            full, host = _origin(origin) if origin is not None else ("", "")
            foreign = (origin is not None and full not in self.allowed and (not host or host != own)) or (
                origin is None and site in ("cross-site", "same-site"))
            if foreign:
                message = (f"a post from another site ({origin or site}) is refused: this reading "
                           "room takes posts from its own pages only")
                await JSONResponse({"error": message}, status_code=403, headers=PRIVATE)(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def bounded_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) past `limit` bytes without reading more of it."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isascii() or not declared.isdigit() or int(declared) > limit):
        raise Refused(413, f"the body is larger than {limit:,} bytes" if declared.isdigit()
                      else "Content-Length is not a number")
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > limit:
            raise Refused(413, f"the body is larger than {limit:,} bytes")
    return bytes(body)


def _validation_words(errors: list[dict]) -> str:
    parts = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body",))
        parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
    return "; ".join(parts)[:500]


def create_app(settings: MabillonSettings, warm: bool = True,
               prefect_ready: Callable[[], None] | None = None) -> FastAPI:
    """The app; `prefect_ready` waits for the Prefect API its questions report to (a temporary
    server still starting, say) before the first `ask` run."""
    room = ReadingRoom(settings)
    sessions = Sessions(settings.reading_room.session_hours * 3600)
    from tasks.reading.iiif_auth import AccessTokens

    access_tokens = AccessTokens()
    templates = reader_templates()
    app = FastAPI(title="Mabillon reading room", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.room = room
    app.state.sessions = sessions
    app.add_middleware(SameOrigin, settings=settings)
    app.add_middleware(IiifCors)

    def viewer(request: Request) -> Principal:
        authorization = request.headers.get("authorization")
        session_id = request.cookies.get(SESSION_COOKIE)
        digest = sessions.digest(session_id)
        if session_id and digest is None and authorization is None:
            raise AccessDenied(SESSION_ENDED)
        return resolve_viewer(settings, authorization, digest, dict(request.headers))

    def when(request: Request, principal: Principal, default: datetime | None = None) -> datetime | None:
        """The request's as_of, from `/at/<as_of>/iiif/...` or `?as_of=` (refused when unreadable,
        or ahead of now for a non-operator)."""
        value = request.path_params.get("as_of") or request.query_params.get("as_of")
        return resolve_as_of(value, principal) if value else default

    def links(request: Request, as_of: datetime | None = None) -> Links:
        """Addresses for this response; those of a past view keep its time (tasks/reading/links.py)."""
        return Links.at(settings.reading_room.url or str(request.base_url), as_of)

    def page(request: Request, name: str, status: int = 200, at: datetime | None = None,
             **context) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"links": links(request, at), **context},
                                          status_code=status, headers=PRIVATE)

    @app.exception_handler(NotFound)
    def not_found(request: Request, exc: NotFound):
        return _refusal(request, templates, 404, NOT_FOUND)

    @app.exception_handler(NoCanvas)
    def no_canvas(request: Request, exc: NoCanvas):
        # raised only for what the viewer may see: saying why tells them nothing new
        return _refusal(request, templates, 404, str(exc))

    @app.exception_handler(AccessDenied)
    def denied(request: Request, exc: AccessDenied):
        return _refusal(request, templates, 401, str(exc))

    @app.exception_handler(AsOfAhead)
    def ahead(request: Request, exc: AsOfAhead):
        # the viewer is known and may not look ahead: forbidden, not "sign in"
        return _refusal(request, templates, 403, str(exc))

    @app.exception_handler(InvalidAsOf)
    def bad_as_of(request: Request, exc: InvalidAsOf):
        return _refusal(request, templates, 400, str(exc))

    @app.exception_handler(ImageRequestError)
    def bad_image_request(request: Request, exc: ImageRequestError):
        return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=IIIF_HEADERS)

    @app.exception_handler(Refused)
    def refused(request: Request, exc: Refused):
        return _refusal(request, templates, exc.status, str(exc))

    @app.exception_handler(RequestValidationError)
    def malformed(request: Request, exc: RequestValidationError):
        return _refusal(request, templates, 422, _validation_words(exc.errors()))

    @app.exception_handler(Exception)
    def failed(request: Request, exc: Exception):
        # logged here, by our own logger: uvicorn's error log is Prefect's console handler once
        # the first question has imported Prefect, and that one is silenced (flows/cli/quiet.py)
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _refusal(request, templates, 500, INTERNAL)

    @app.get("/healthz")
    def healthz():
        return {"ok": True}

    # pages ------------------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse)
    def home(request: Request):
        principal = viewer(request)
        return page(request, "home.html", principal=principal, records=room.records(principal, 50))

    def chosen(request: Request) -> ListFilter:
        """The page's filters (corpus, dates, words, page), refused with words when unreadable."""
        try:
            return ListFilter.of(request.query_params)
        except ValidationError as exc:
            raise Refused(400, f"filtre illisible — {_validation_words(exc.errors())}") from None

    @app.get("/documents", response_class=HTMLResponse)
    def documents(request: Request):
        principal = viewer(request)
        at = when(request, principal)
        view = room.visible(principal, at)
        catalog = view.snapshot.catalog
        revisions = [catalog.revisions[r] for r in view.revisions] if catalog else []
        return page(request, "documents.html", at=at, principal=view.principal,
                    listing=documents_page(catalog, revisions, chosen(request)),
                    generation=view.snapshot.generation)

    @app.get("/documents/{doc_id:path}", response_class=HTMLResponse)
    def document(request: Request, doc_id: str):
        principal = viewer(request)
        at = when(request, principal)
        view = room.visible(principal, at)
        doc = document_view(room, view, links(request, at), view.current(doc_id))
        title, supplied = document_title(view.snapshot.catalog, doc.revision)
        return page(request, "document.html", at=at, principal=view.principal, doc=doc,
                    title=title, supplied=supplied)

    @app.get("/queries/{query_id}", response_class=HTMLResponse)
    def evidence(request: Request, query_id: str):
        principal = viewer(request)
        record = room.record(principal, query_id)
        at = when(request, principal, record.as_of)
        filters = chosen(request)
        view = room.visible(principal, at)
        evidence = evidence_page(evidence_view(room, view, links(request, at), record),
                                 view.snapshot.catalog, filters)
        return page(request, "evidence.html", at=at, principal=principal, evidence=evidence)

    @app.post("/ask")
    def ask_page(request: Request, question: str = Form(..., min_length=3, max_length=2000),
                 as_of: str = Form("", max_length=64)):
        principal = viewer(request)
        resolve_as_of(as_of, principal)  # refused here, before a run, when unreadable or ahead
        package = ask_in_room(settings, principal, question, as_of or None, prefect_ready)
        return RedirectResponse(f"/queries/{package.query_id}", status_code=303)

    @app.get("/login", response_class=HTMLResponse)
    def login_form(request: Request):
        back = return_to(request.query_params.get("next") or request.headers.get("referer"), request)
        return page(request, "login.html", principal=None, error=None, next=back)

    @app.post("/login")
    def login(request: Request, token: str = Form(..., min_length=1, max_length=512),
              next: str = Form("", max_length=2048)):
        back = return_to(next or request.headers.get("referer"), request)
        try:
            resolve_viewer(settings, f"Bearer {token}")
        except AccessDenied as exc:
            return page(request, "login.html", status=401, principal=None, error=str(exc), next=back)
        sessions.close(request.cookies.get(SESSION_COOKIE))  # a fresh id at every sign-in
        response = RedirectResponse(back, status_code=303)
        response.set_cookie(SESSION_COOKIE, sessions.open(token_digest(token.strip())),
                            max_age=int(sessions.lifetime_s), httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        response.delete_cookie(OLD_TOKEN_COOKIE)
        return response

    @app.post("/logout")
    def logout(request: Request):
        sessions.close(request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(SESSION_COOKIE)
        response.delete_cookie(OLD_TOKEN_COOKIE)
        return response

    # references to take away (reference managers, spreadsheets) -----------------------------
    @app.get("/export/{fmt}/queries/{query_id}")
    def export_query(request: Request, fmt: str, query_id: str, rank: int | None = Query(None, ge=1)):
        from tasks.cite.export import query_references

        checked = export_format(fmt)
        principal = viewer(request)
        refs = query_references(room, principal, query_id, lambda at: links(request, at),
                                lambda recorded: when(request, principal, recorded), rank)
        if rank is not None and not refs:  # withdrawn, or no such rank: nothing to say which
            raise NotFound(f"{query_id}#{rank}")
        return exported(refs, checked, f"mabillon-{query_id}" + (f"-{rank}" if rank else ""))

    @app.get("/export/{fmt}/documents/{doc_id:path}")
    def export_document(request: Request, fmt: str, doc_id: str):
        from tasks.cite.export import document_references

        checked = export_format(fmt)
        principal = viewer(request)
        at = when(request, principal)
        refs = document_references(room, principal, doc_id, links(request, at), at)
        return exported(refs, checked, f"mabillon-{refs[0].key}")

    # JSON for programs ------------------------------------------------------------------------
    @app.get("/api/queries")
    def api_queries(request: Request):
        principal = viewer(request)
        return JSONResponse([{"query_id": r.query_id, "created_at": r.created_at,
                              "question": r.question, "generation": r.generation}
                             for r in room.records(principal)], headers=PRIVATE)

    @app.get("/api/queries/{query_id}")
    def api_query(request: Request, query_id: str):
        principal = viewer(request)
        record = room.record(principal, query_id)
        at = when(request, principal, record.as_of)
        view = evidence_view(room, room.visible(principal, at), links(request, at), record)
        return JSONResponse(_evidence_json(view), headers=PRIVATE)

    @app.post("/api/ask")
    async def api_ask(request: Request):
        # JSON only: a page of another origin cannot send it without a preflight, never granted
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise Refused(415, 'send the question as JSON (Content-Type: application/json): '
                               '{"question": "...", "as_of": "2027-01-01"}')
        body = await bounded_body(request, MAX_ASK_BODY_BYTES)
        try:
            asked = AskRequest.model_validate_json(body)
        except ValidationError as exc:
            raise Refused(400, "the body is not {\"question\": \"...\"} (3 to 2000 characters; "
                               f"as_of optional): {_validation_words(exc.errors())}") from None
        principal = viewer(request)
        as_of = asked.as_of or None
        resolve_as_of(as_of, principal)
        from starlette.concurrency import run_in_threadpool

        package = await run_in_threadpool(ask_in_room, settings, principal, asked.question, as_of,
                                          prefect_ready)
        return JSONResponse(package.model_dump(mode="json"), headers=PRIVATE)

    # IIIF -------------------------------------------------------------------------------------
    # each IIIF route also answers under /at/<as_of>/: a past view's addresses (Links.iiif)
    @app.get("/iiif/3/{image_id}")
    @app.get("/at/{as_of}/iiif/3/{image_id}")
    def image_base(request: Request, image_id: str):
        principal = viewer(request)
        at = when(request, principal)
        room.image_page(room.visible(principal, at), image_id)  # 404 before any redirect
        return RedirectResponse(f"{links(request, at).iiif}/iiif/3/{image_id}/info.json", status_code=303,
                                headers=IIIF_HEADERS)

    @app.get("/iiif/3/{image_id}/info.json")
    @app.get("/at/{as_of}/iiif/3/{image_id}/info.json")
    def image_info(request: Request, image_id: str):
        principal = viewer(request)
        at = when(request, principal)
        info = room.info(principal, image_id, f"{links(request, at).iiif}/iiif/3/{image_id}", at,
                         base=links(request).base)
        wants_ld = "application/ld+json" in request.headers.get("accept", "")
        return JSONResponse(info, media_type=JSON_LD if wants_ld else "application/json",
                            headers=IIIF_HEADERS)

    @app.get("/iiif/3/{image_id}/{region}/{size}/{rotation}/{quality_format}")
    @app.get("/at/{as_of}/iiif/3/{image_id}/{region}/{size}/{rotation}/{quality_format}")
    def image(request: Request, image_id: str, region: str, size: str, rotation: str,
              quality_format: str):
        principal = viewer(request)
        at = when(request, principal)
        data, media_type, canonical = room.image(principal, image_id, region, size, rotation,
                                                 quality_format, at)
        service = f"{links(request, at).iiif}/iiif/3/{image_id}"
        link = f'<{service}/{canonical}>;rel="canonical", <{IMAGE_PROFILE}>;rel="profile"'
        return Response(data, media_type=media_type, headers={**IIIF_HEADERS, "Link": link})

    # IIIF Authorization Flow 2.0 (tasks/reading/iiif_auth.py) ----------------------------------
    @app.get("/iiif/auth/access")
    def iiif_access(request: Request):
        return RedirectResponse("/login", status_code=303, headers=PRIVATE)

    @app.get("/iiif/auth/token")
    def iiif_token(request: Request, messageId: str = "", origin: str = ""):
        from tasks.reading.iiif_auth import safe_origin, token_message, token_page

        target = safe_origin(origin)
        if not messageId or len(messageId) > 200 or target is None:
            raise Refused(400, "the token service takes ?messageId=...&origin=scheme://host[:port]")
        session_id = request.cookies.get(SESSION_COOKIE)
        signed_in = session_id if sessions.digest(session_id) is not None else None
        token = access_tokens.mint(signed_in) if signed_in else None
        return HTMLResponse(token_page(token_message(messageId, token), target), headers=PRIVATE)

    @app.get("/iiif/auth/probe/{image_id}")
    def iiif_probe(request: Request, image_id: str):
        from tasks.reading.iiif_auth import probe_result

        authorization = request.headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        session_id = access_tokens.session(token.strip()) if scheme.lower() == "bearer" else None
        digest = sessions.digest(session_id)
        opens = False
        if digest is not None:
            try:
                principal = resolve_viewer(settings, None, digest)
                room.image_page(room.visible(principal), image_id)
                opens = True
            except (AccessDenied, NotFound):
                opens = False
        # HTTP 200 either way: the probe's answer is its body (Auth 2.0 §2.3)
        return JSONResponse(probe_result(opens), headers=IIIF_HEADERS)

    @app.get("/iiif/manifest/{revision_id}")
    @app.get("/at/{as_of}/iiif/manifest/{revision_id}")
    def manifest(request: Request, revision_id: str):
        principal = viewer(request)
        at = when(request, principal)
        view = room.visible(principal, at)
        body = revision_manifest(room, view, links(request, at), view.revision(revision_id))
        return JSONResponse(body, media_type=PRESENTATION_LD, headers=IIIF_HEADERS)

    @app.get("/iiif/query/{query_id}/manifest")
    @app.get("/at/{as_of}/iiif/query/{query_id}/manifest")
    def manifest_of_query(request: Request, query_id: str):
        principal = viewer(request)
        record = room.record(principal, query_id)
        at = when(request, principal, record.as_of)
        view = room.visible(principal, at)
        evidence = evidence_view(room, view, links(request, at), record)
        body = query_manifest(room, view, links(request, at), record, evidence)
        return JSONResponse(body, media_type=PRESENTATION_LD, headers=IIIF_HEADERS)

    if warm:
        threading.Thread(target=warm_up, args=(room, settings, prefect_ready),
                         name="reading-room-warm-up", daemon=True).start()
    return app


def reader_templates() -> Jinja2Templates:
    """The page templates, with the filters that put values in a reader's French
    (tasks/reading/wording.py): dates in words, corpora and formats by name, no `None`."""
    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.filters.update(date_fr=wording.french_date, datetime_fr=wording.french_datetime,
                                 corpus_fr=wording.corpus_label, media_fr=wording.media_label,
                                 provider_fr=wording.provider_label, head=head_words,
                                 tail=tail_words)
    templates.env.globals.update(source_label=wording.source_label)
    return templates


def head_words(text: str, limit: int) -> str:
    """What follows a cited span, shown after it: the rest of its paragraph, at most `limit`
    characters cut at a word ('…' where it was cut)."""
    cut = text[:limit]
    if "\n\n" in cut:
        return cut.split("\n\n", 1)[0]
    if len(text) <= limit:
        return text
    return cut.rsplit(" ", 1)[0] + "…"


def tail_words(text: str, limit: int) -> str:
    """What precedes a cited span, shown before it: the start of its paragraph, at most
    `limit` characters cut at a word ('…' where it was cut)."""
    text = text.removeprefix("…")
    cut = text[-limit:]
    if "\n\n" in cut:
        return cut.rsplit("\n\n", 1)[1]
    if len(text) <= limit:
        return text
    return "…" + (cut.split(" ", 1)[1] if " " in cut else cut)


def return_to(address: str | None, request: Request) -> str:
    """Where a sign-in goes back to: a path of this room (from the form, or the page the
    reader came from); anything else — another site, a scheme, `//host` — goes home."""
    if not address or any(ord(ch) < 0x20 or ch == "\\" for ch in address):
        return "/"
    try:
        parts = urlsplit(address)
    except ValueError:
        return "/"
    own = request.headers.get("host", "").strip().lower()
    if parts.netloc and (parts.netloc.lower() != own or parts.scheme not in ("http", "https")):
        return "/"
    if parts.scheme and not parts.netloc:
        return "/"
    path = parts.path
    if not path.startswith("/") or path.startswith("//") or path.startswith(("/login", "/logout")):
        return "/"
    return path + (f"?{parts.query}" if parts.query else "")


def _refusal(request: Request, templates: Jinja2Templates, status: int, message: str):
    """The same answer for every refusal of a kind: nothing says why beyond `message`."""
    path = request.url.path
    if path.startswith(("/iiif/", "/api/", "/at/")):
        headers = PRIVATE if path.startswith("/api/") else IIIF_HEADERS
        return JSONResponse({"error": message}, status_code=status, headers=headers)
    return templates.TemplateResponse(request, "refusal.html", {"status": status, "message": message},
                                      status_code=status, headers=PRIVATE)


def export_format(fmt: str) -> str:
    from schemas.citation import EXPORT_FORMATS

    if fmt not in EXPORT_FORMATS:
        raise Refused(400, f"no export format {fmt[:40]!r}: choose one of {', '.join(EXPORT_FORMATS)}")
    return fmt


def exported(refs: list, fmt: str, stem: str) -> Response:
    """The references as a file to save (a reference manager opens it)."""
    from schemas.citation import MEDIA_TYPES, SUFFIXES
    from tasks.cite.formats import render

    name = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "-" for c in stem)[:100]
    return Response(render(refs, fmt), media_type=MEDIA_TYPES[fmt], headers={
        **PRIVATE, "Content-Disposition": f'attachment; filename="{name}.{SUFFIXES[fmt]}"'})


def _evidence_json(view) -> dict:
    from dataclasses import asdict

    record = view.record
    return {"query_id": record.query_id, "question": record.question.question,
            "created_at": record.created_at, "generation": record.generation,
            "provider": record.provider, "flags": record.flags, "manifest": view.manifest_url,
            "documents": [asdict(d) for d in view.documents]}


# what a refused question answers: the CLI's exit codes (flows/cli/errors.py) as HTTP statuses
# (not "not_found": a file missing inside a run is a failure, and its message names a path)
_ASK_STATUS = {"usage": 400, "access_denied": 403, "refused": 409, "not_ready": 503, "busy": 503,
               "unavailable": 503}


def ask_in_room(settings: MabillonSettings, principal: Principal, question: str,
                as_of: str | None = None, prefect_ready: Callable[[], None] | None = None):
    """Run the `ask` flow for the viewer; its retriever and models are warm in this process.

    A question the flow refuses (too long for the embedding model, nothing serving, ...) is a
    Refused with the flow's own words; anything else is a failure, raised as it is."""
    from flows.ask import AskParams, ask
    from flows.cli.errors import explain

    name = None if principal.principal_id == DEFAULT_PRINCIPAL else principal.principal_id
    if prefect_ready is not None:
        prefect_ready()
    try:
        return ask(params=AskParams(question=question, principal=name, as_of=as_of), settings=settings)
    except (AccessDenied, InvalidAsOf):
        raise
    except Exception as exc:
        explained = explain(exc)
        if explained.kind not in _ASK_STATUS:
            raise
        raise Refused(_ASK_STATUS[explained.kind], explained.message) from None


def warm_up(room: ReadingRoom, settings: MabillonSettings,
            prefect_ready: Callable[[], None] | None = None) -> None:
    """Load the serving generation, the embedding model and the lexical index once, so the
    first researcher does not wait for them."""
    started = time.perf_counter()
    try:
        principal = default_principal(settings)
        room.visible(principal)
        from tasks.query.retriever import Retriever
        from tasks.store.serving import NoServingGeneration

        try:
            retriever = Retriever.open(settings, principal)
        except NoServingGeneration:
            return
        retriever.bm25_chunks("archives", k=1)
        retriever.dense_chunks("archives", k=1)
        if prefect_ready is not None:
            prefect_ready()
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:  # starts Prefect's local API if none is set
            client.hello()
        log.info("reading room warm in %.1fs", time.perf_counter() - started)
    except Exception:  # warming is an optimisation; a failure shows again on the first request
        log.exception("reading room warm-up failed")


def serve_reading_room(settings: MabillonSettings, host: str, port: int,
                       prefect_ready: Callable[[], None] | None = None) -> None:
    """Serve until interrupted. SIGINT or SIGTERM: uvicorn stops gracefully, then raises the
    signal again; SIGTERM is turned into KeyboardInterrupt here, so the process unwinds (and
    stops the Prefect server it started) instead of dying at once."""
    import signal

    import uvicorn

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)
    # a stop waits at most this long for questions still being answered. Idle connections are
    # kept 75 s (nginx's default), not uvicorn's 5 s: a client that keeps them 5 s too (httpx)
    # sent its next request on one the room was closing at that moment and was reset (a test
    # after an idle moment, in a full run); clients let theirs go first, browsers retry.
    config = uvicorn.Config(create_app(settings, prefect_ready=prefect_ready), host=host, port=port,
                            log_level="warning", access_log=False, proxy_headers=False,
                            timeout_graceful_shutdown=10, timeout_keep_alive=75)
    uvicorn.Server(config).run()
