"""The warm query service of `mabillon serve`: answers `mabillon ask` from a process that has the
embedding model loaded and the generation open, so a question costs its answer and not a cold
start (loading torch, the model, the LanceDB table: seconds per command).

It listens on loopback only, behind a random bearer key written to the home's owner-only
serve-state file: whoever can read that file owns the state root, and may ask as any principal
of principals.json, as on the CLI. One endpoint, `POST /ask`: a FastAPI app (the reading room's
framework) under uvicorn, on a thread of `mabillon serve`; each answer runs on the app's thread
pool, as each request had its own thread before.

Retrievers are kept per (generation, principal policy, tombstones, routing, as_of): a promotion,
a canary, a deletion or a change of principals.json opens a new one at the next question, so no
allowed set outlives the policy (or the route) it was built from.
"""
from __future__ import annotations

import hashlib
import json
import logging
import secrets
import socket
import threading
from collections import OrderedDict

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from schemas.retrieval import Principal
from schemas.settings import MabillonSettings

log = logging.getLogger(__name__)
MAX_BODY = 1 << 20
KEPT_RETRIEVERS = 8


def _stamp(path) -> tuple:
    try:
        st = path.stat()
        return (st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        return (None, None)


class WarmRetrievers:
    """Open retrievers, reused while the generation, the principal and the tombstones are the same."""

    def __init__(self, settings: MabillonSettings, kept: int = KEPT_RETRIEVERS):
        from tasks.store.layout import StoreLayout

        self.settings = settings
        self.layout = StoreLayout.from_settings(settings)
        self.kept = kept
        self._open: OrderedDict[tuple, object] = OrderedDict()
        self._lock = threading.Lock()

    def key(self, principal: Principal, generation: str | None, as_of: str | None = None) -> tuple:
        from tasks.store.layout import principals_path
        from tasks.store.routing import read_routing
        from tasks.store.tombstones import tombstones_path

        # Unnamed, the generation is the principal's route (a canary's or the serving one); the
        # routing record's stamp keeps a retriever from outliving the route it was opened on.
        routed = read_routing(self.layout).route_for(principal.groups)
        gen = generation or (routed.generation if routed else None)
        who = hashlib.sha256(principal.model_dump_json().encode()).hexdigest()
        return (gen, generation is None, as_of, who, _stamp(tombstones_path(self.layout)),
                _stamp(principals_path(self.settings)), _stamp(self.layout.routing))

    def get(self, principal: Principal, generation: str | None, as_of: str | None = None):
        from tasks.query.retriever import Retriever

        key = self.key(principal, generation, as_of)
        with self._lock:
            if key in self._open:
                self._open.move_to_end(key)
                return self._open[key]
        retriever = Retriever.open(self.settings, principal, generation, as_of=as_of)
        with self._lock:
            self._open[key] = retriever
            while len(self._open) > self.kept:
                self._open.popitem(last=False)
        return retriever

    def warm_up(self) -> None:
        """Open the serving generation for the default principal (loads the model)."""
        from tasks.access.principals import default_principal

        try:
            self.get(default_principal(self.settings), None)
            log.info("query service warm")
        except Exception as exc:  # nothing serving yet, say: the first question opens it
            log.info("query service not warmed: %s", exc)


def _json(status: int, payload: dict) -> Response:
    return Response(json.dumps(payload, ensure_ascii=False).encode("utf-8"), status_code=status,
                    media_type="application/json; charset=utf-8")


def create_app(service: "QueryService") -> FastAPI:
    """`POST /ask` behind the bearer key; another path is 404, another method 501."""
    app = FastAPI(title="Mabillon query service", docs_url=None, redoc_url=None, openapi_url=None)

    @app.api_route("/{path:path}", methods=["POST"])
    async def post(request: Request, path: str) -> Response:
        if not secrets.compare_digest(request.headers.get("authorization", ""), f"Bearer {service.key}"):
            return _json(401, {"error": "unauthorized", "code": 4, "kind": "access_denied"})
        if request.url.path != "/ask" or request.url.query:
            return _json(404, {"error": "no such endpoint", "code": 3, "kind": "not_found"})
        length = int(request.headers.get("content-length") or 0)
        if length > MAX_BODY:
            return _json(413, {"error": "request too large", "code": 2, "kind": "usage"})
        try:
            body = await request.body() if length else b""
            return _json(200, await run_in_threadpool(service.answer, json.loads(body or b"{}")))
        except Exception as exc:
            from flows.cli.errors import Exit, explain

            explained = explain(exc)
            if explained.code == Exit.FAILED:
                log.exception("query service failed")
            return _json(422 if explained.code != Exit.FAILED else 500, explained.as_json())

    @app.api_route("/{path:path}", methods=["GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"])
    async def other(request: Request, path: str) -> Response:
        return _json(501, {"error": f"unsupported method ({request.method})", "code": 2, "kind": "usage"})

    return app


class QueryService:
    def __init__(self, settings: MabillonSettings, host: str = "127.0.0.1", port: int = 0):
        import uvicorn

        self.settings = settings
        self.key = secrets.token_urlsafe(32)
        self.retrievers = WarmRetrievers(settings)
        # bound here, so the url (a port of 0 is any free one) is known before the thread starts
        self._socket = socket.create_server((host, port))
        self.url = f"http://{host}:{self._socket.getsockname()[1]}"
        # log_config=None: uvicorn leaves the logging of `mabillon serve` as it is
        self._server = uvicorn.Server(uvicorn.Config(create_app(self), log_config=None, log_level="warning",
                                                     access_log=False, proxy_headers=False,
                                                     timeout_graceful_shutdown=10))
        self._thread: threading.Thread | None = None

    def start(self, warm: bool = True) -> "QueryService":
        # uvicorn installs no signal handlers off the main thread: `mabillon serve` keeps its own
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name="query-service", daemon=True)
        self._thread.start()
        if warm:
            threading.Thread(target=self.retrievers.warm_up, name="query-warm-up", daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
        self._socket.close()

    def answer(self, request: dict) -> dict:
        from flows.answer import AskParams, answer
        from tasks.access.principals import resolve_principal

        params = AskParams.model_validate(request)
        principal = resolve_principal(self.settings, params.principal)
        retriever = self.retrievers.get(principal, params.generation_name(), params.as_of)
        return answer(self.settings, params, principal, retriever).model_dump(mode="json")


class ServiceRefused(Exception):
    """The service answered with an error (its words and exit code travel with it)."""

    def __init__(self, payload: dict):
        super().__init__(payload.get("error", "the query service refused"))
        self.payload = payload


def ask_service(url: str, key: str, request: dict, timeout_s: float = 900) -> dict:
    """POST a question; the evidence package as JSON, or ServiceRefused. A service that cannot be
    reached raises httpx.TransportError (the caller answers by itself then)."""
    import httpx

    response = httpx.post(f"{url}/ask", json=request, headers={"Authorization": f"Bearer {key}"},
                          timeout=httpx.Timeout(timeout_s, connect=1.0))
    payload = response.json()
    if response.status_code != 200:
        raise ServiceRefused(payload)
    return payload
