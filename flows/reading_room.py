"""The reading room: an ASGI app over the serving generation (`mabillon reading-room`).

Pages a person reads (evidence of a query, a document and how it was cut, a question box) and
JSON a program reads (IIIF Image API 3 and Presentation 3, the evidence as JSON). Every request
resolves its viewer (tasks/reading/viewer.py) and is answered from what that viewer may see now
— or at the `?as_of=` the request names (an ISO 8601 date or time; a query's evidence at the
query's own as_of) — in the generation routed to them (tasks/reading/room.py): anything else
is the same 404 as what does not exist.
"""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from fastapi import FastAPI, Form, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from datetime import datetime

from schemas.retrieval import AccessDenied, Principal
from schemas.settings import MabillonSettings
from tasks.query.principals import DEFAULT_PRINCIPAL, default_principal
from tasks.query.validity import AsOfAhead, InvalidAsOf, resolve_as_of
from tasks.reading.image_request import ImageRequestError
from tasks.reading.links import Links
from tasks.reading.manifests import query_manifest, revision_manifest
from tasks.reading.room import NotFound, ReadingRoom
from tasks.reading.viewer import resolve_viewer
from tasks.reading.views import document_view, evidence_view

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).resolve().parent / "templates" / "reading_room"
TOKEN_COOKIE = "mabillon_token"
NOT_FOUND = "not found"
JSON_LD = 'application/ld+json;profile="http://iiif.io/api/image/3/context.json"'
PRESENTATION_LD = 'application/ld+json;profile="http://iiif.io/api/presentation/3/context.json"'
# Responses depend on who asks: never kept by shared caches, revalidated by the browser.
PRIVATE = {"Cache-Control": "private, no-cache", "Vary": "Authorization, Cookie"}
IIIF_HEADERS = {**PRIVATE, "Access-Control-Allow-Origin": "*",
                "Link": '<http://iiif.io/api/image/3/level1.json>;rel="profile"'}


def create_app(settings: MabillonSettings, warm: bool = True) -> FastAPI:
    room = ReadingRoom(settings)
    templates = Jinja2Templates(directory=str(TEMPLATES))
    app = FastAPI(title="Mabillon reading room", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.room = room
    # IIIF clients on other origins (Mirador, Universal Viewer) send the bearer token themselves.
    app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["GET"],
                       allow_headers=["Authorization"], allow_credentials=False)

    def viewer(request: Request) -> Principal:
        return resolve_viewer(settings, request.headers.get("authorization"),
                              request.cookies.get(TOKEN_COOKIE), dict(request.headers))

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

    @app.get("/healthz")
    def healthz():
        return {"ok": True}

    # pages ------------------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse)
    def home(request: Request):
        principal = viewer(request)
        return page(request, "home.html", principal=principal, records=room.records(principal, 50))

    @app.get("/documents", response_class=HTMLResponse)
    def documents(request: Request):
        principal = viewer(request)
        at = when(request, principal)
        view = room.visible(principal, at)
        catalog = view.snapshot.catalog
        revisions = sorted((catalog.revisions[r] for r in view.revisions), key=lambda r: r.doc_id) if catalog else []
        return page(request, "documents.html", at=at, principal=view.principal, revisions=revisions,
                    generation=view.snapshot.generation)

    @app.get("/documents/{doc_id:path}", response_class=HTMLResponse)
    def document(request: Request, doc_id: str):
        principal = viewer(request)
        at = when(request, principal)
        view = room.visible(principal, at)
        doc = document_view(room, view, links(request, at), view.current(doc_id))
        return page(request, "document.html", at=at, principal=view.principal, doc=doc)

    @app.get("/queries/{query_id}", response_class=HTMLResponse)
    def evidence(request: Request, query_id: str):
        principal = viewer(request)
        record = room.record(principal, query_id)
        at = when(request, principal, record.as_of)
        view = room.visible(principal, at)
        return page(request, "evidence.html", at=at, principal=principal,
                    evidence=evidence_view(room, view, links(request, at), record))

    @app.post("/ask")
    def ask_page(request: Request, question: str = Form(..., min_length=3, max_length=2000),
                 as_of: str = Form("", max_length=64)):
        principal = viewer(request)
        resolve_as_of(as_of, principal)  # refused here, before a run, when unreadable or ahead
        package = ask_in_room(settings, principal, question, as_of or None)
        return RedirectResponse(f"/queries/{package.query_id}", status_code=303)

    @app.get("/login", response_class=HTMLResponse)
    def login_form(request: Request):
        return page(request, "login.html", principal=None, error=None)

    @app.post("/login")
    def login(request: Request, token: str = Form(..., min_length=1, max_length=512)):
        try:
            resolve_viewer(settings, f"Bearer {token}")
        except AccessDenied as exc:
            return page(request, "login.html", status=401, principal=None, error=str(exc))
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    @app.post("/logout")
    def logout():
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(TOKEN_COOKIE)
        return response

    # JSON for programs ------------------------------------------------------------------------
    @app.get("/api/queries")
    def api_queries(request: Request):
        principal = viewer(request)
        return JSONResponse([{"query_id": r.query_id, "created_at": r.created_at,
                              "question": r.question.question, "generation": r.generation}
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
        body = await request.json()
        question = body.get("question") if isinstance(body, dict) else None
        if not isinstance(question, str) or not 3 <= len(question.strip()) <= 2000:
            return JSONResponse({"error": "give {\"question\": \"...\"} (3 to 2000 characters)"},
                                status_code=400)
        principal = viewer(request)
        as_of = body.get("as_of") or None
        if as_of is not None and not isinstance(as_of, str):
            raise InvalidAsOf("as_of must be an ISO 8601 date or time, as a string")
        resolve_as_of(as_of, principal)
        from starlette.concurrency import run_in_threadpool

        package = await run_in_threadpool(ask_in_room, settings, principal, question, as_of)
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
        info = room.info(principal, image_id, f"{links(request, at).iiif}/iiif/3/{image_id}", at)
        wants_ld = "application/ld+json" in request.headers.get("accept", "")
        return JSONResponse(info, media_type=JSON_LD if wants_ld else "application/json",
                            headers=IIIF_HEADERS)

    @app.get("/iiif/3/{image_id}/{region}/{size}/{rotation}/{quality_format}")
    @app.get("/at/{as_of}/iiif/3/{image_id}/{region}/{size}/{rotation}/{quality_format}")
    def image(request: Request, image_id: str, region: str, size: str, rotation: str,
              quality_format: str):
        principal = viewer(request)
        data, media_type = room.image(principal, image_id, region, size, rotation,
                                      quality_format, when(request, principal))
        return Response(data, media_type=media_type, headers=IIIF_HEADERS)

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
        threading.Thread(target=warm_up, args=(room, settings), name="reading-room-warm-up",
                         daemon=True).start()
    return app


def _refusal(request: Request, templates: Jinja2Templates, status: int, message: str):
    """The same answer for every refusal of a kind: nothing says why beyond `message`."""
    path = request.url.path
    if path.startswith(("/iiif/", "/api/", "/at/")):
        headers = PRIVATE if path.startswith("/api/") else IIIF_HEADERS
        return JSONResponse({"error": message}, status_code=status, headers=headers)
    return templates.TemplateResponse(request, "refusal.html", {"status": status, "message": message},
                                      status_code=status, headers=PRIVATE)


def _evidence_json(view) -> dict:
    from dataclasses import asdict

    record = view.record
    return {"query_id": record.query_id, "question": record.question.question,
            "created_at": record.created_at, "generation": record.generation,
            "provider": record.provider, "flags": record.flags, "manifest": view.manifest_url,
            "documents": [asdict(d) for d in view.documents]}


def ask_in_room(settings: MabillonSettings, principal: Principal, question: str,
                as_of: str | None = None):
    """Run the `ask` flow for the viewer; its retriever and models are warm in this process."""
    from flows.ask import AskParams, ask

    name = None if principal.principal_id == DEFAULT_PRINCIPAL else principal.principal_id
    return ask(params=AskParams(question=question, principal=name, as_of=as_of), settings=settings)


def warm_up(room: ReadingRoom, settings: MabillonSettings) -> None:
    """Load the serving generation, the embedding model and the lexical index once, so the
    first researcher does not wait for them."""
    started = time.perf_counter()
    try:
        principal = default_principal(settings)
        room.visible(principal)
        from tasks.query.retriever import NoServingGeneration, Retriever

        try:
            retriever = Retriever.open(settings, principal)
        except NoServingGeneration:
            return
        retriever.bm25_chunks("archives", k=1)
        retriever.dense_chunks("archives", k=1)
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:  # starts Prefect's local API if none is set
            client.hello()
        log.info("reading room warm in %.1fs", time.perf_counter() - started)
    except Exception:  # warming is an optimisation; a failure shows again on the first request
        log.exception("reading room warm-up failed")


def serve_reading_room(settings: MabillonSettings, host: str, port: int) -> None:
    """Serve until interrupted (SIGINT or SIGTERM: uvicorn stops gracefully)."""
    import uvicorn

    # a stop waits at most this long for questions still being answered
    config = uvicorn.Config(create_app(settings), host=host, port=port, log_level="warning",
                            access_log=False, proxy_headers=False, timeout_graceful_shutdown=10)
    uvicorn.Server(config).run()
