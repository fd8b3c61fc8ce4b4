"""The warm query service of `mabillon serve`: answers `mabillon ask` from a process that has the
embedding model loaded and the generation open, so a question costs its answer and not a cold
start (loading torch, the model, the LanceDB table: seconds per command).

It listens on loopback only, behind a random bearer key written to the home's owner-only
serve-state file: whoever can read that file owns the state root, and may ask as any principal
of principals.json, as on the CLI.

Retrievers are kept per (generation, principal policy, tombstones, routing, as_of): a promotion,
a canary, a deletion or a change of principals.json opens a new one at the next question, so no
allowed set outlives the policy (or the route) it was built from.
"""
from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


class QueryService:
    def __init__(self, settings: MabillonSettings, host: str = "127.0.0.1", port: int = 0):
        self.settings = settings
        self.key = secrets.token_urlsafe(32)
        self.retrievers = WarmRetrievers(settings)
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def start(self, warm: bool = True) -> "QueryService":
        self._thread = threading.Thread(target=self._server.serve_forever, name="query-service",
                                        daemon=True)
        self._thread.start()
        if warm:
            threading.Thread(target=self.retrievers.warm_up, name="query-warm-up", daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, request: dict) -> dict:
        from flows.answer import AskParams, answer
        from tasks.access.principals import resolve_principal

        params = AskParams.model_validate(request)
        principal = resolve_principal(self.settings, params.principal)
        retriever = self.retrievers.get(principal, params.generation_name(), params.as_of)
        return answer(self.settings, params, principal, retriever).model_dump(mode="json")

    def _handler(self):
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):  # requests are not worth a line each
                log.debug("query service: " + fmt, *args)

            def _send(self, status: int, payload: dict) -> None:
                body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                if not secrets.compare_digest(self.headers.get("Authorization", ""),
                                              f"Bearer {service.key}"):
                    return self._send(401, {"error": "unauthorized", "code": 4, "kind": "access_denied"})
                if self.path != "/ask":
                    return self._send(404, {"error": "no such endpoint", "code": 3, "kind": "not_found"})
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    return self._send(413, {"error": "request too large", "code": 2, "kind": "usage"})
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                    return self._send(200, service.answer(request))
                except Exception as exc:
                    from flows.cli.errors import Exit, explain

                    explained = explain(exc)
                    if explained.code == Exit.FAILED:
                        log.exception("query service failed")
                    return self._send(422 if explained.code != Exit.FAILED else 500, explained.as_json())

        return Handler


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
