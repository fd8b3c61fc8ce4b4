"""IIIF Authorization Flow 2.0 for restricted pages: the probe, access and token services a
viewer (Mirador, UV) follows to sign a reader in and learn whether a page opens for them.

- Access service (profile `active`): the room's own sign-in page, opened by the viewer in a
  window; it sets the room's session cookie (tasks/reading/sessions.py).
- Token service: loaded by the viewer in an iframe with `messageId` and `origin`; it answers a
  page that posts `AuthAccessToken2` to that origin — an access token minted for the session,
  good for probes only (it opens no image and no page), or `AuthAccessTokenError2`.
- Probe service: `Authorization: Bearer <access token>` → `AuthProbeResult2` status 200 when the
  page opens for that reader, 401 otherwise — the same 401, word for word, for a page that does
  not exist and one the reader may not see, so the probe discloses nothing the 404 does not.

A page is restricted when the anonymous reader cannot see it; only then do info.json and the
manifest list the probe, and only to a reader who may see the page (to anyone else its info.json
is the 404 of a missing page, as before).
"""
from __future__ import annotations

import json
import secrets
import threading
import time
from collections import OrderedDict

CONTEXT = "http://iiif.io/api/auth/2/context.json"
LANGUAGE = "fr"
TOKEN_TTL_S = 3600
MAX_TOKENS = 10_000
HEADING_401 = "Connexion requise"
NOTE_401 = ("Cette page ne s'ouvre pas pour vous : connectez-vous avec un compte qui y a accès "
            "(ou elle n'existe pas).")


def _text(value: str) -> dict:
    return {LANGUAGE: [value]}


def probe_service(base: str, image_id: str) -> dict:
    """The service block for a restricted page (info.json `service`, a manifest body's `service`)."""
    return {
        "id": f"{base}/iiif/auth/probe/{image_id}", "type": "AuthProbeService2",
        "service": [{
            "id": f"{base}/iiif/auth/access", "type": "AuthAccessService2", "profile": "active",
            "label": _text("Se connecter à la salle de lecture"),
            "heading": _text("Page réservée"),
            "note": _text("Connectez-vous avec votre jeton d'accès, puis fermez la fenêtre."),
            "confirmLabel": _text("Se connecter"),
            "service": [{"id": f"{base}/iiif/auth/token", "type": "AuthAccessTokenService2"}],
        }],
    }


def probe_result(opens: bool) -> dict:
    if opens:
        return {"@context": CONTEXT, "type": "AuthProbeResult2", "status": 200}
    return {"@context": CONTEXT, "type": "AuthProbeResult2", "status": 401,
            "heading": _text(HEADING_401), "note": _text(NOTE_401)}


def token_page(message: dict, origin: str) -> str:
    """The page the token service answers in the viewer's iframe: it posts `message` to the
    viewer's window at `origin` (and to no other origin)."""
    def inert(value) -> str:  # JSON that cannot close the script element it sits in
        return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e")

    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>IIIF</title></head><body>"
            f"<script>window.parent.postMessage({inert(message)}, {inert(origin)});</script>"
            "</body></html>")


def token_message(message_id: str, access_token: str | None, expires_in: int = TOKEN_TTL_S) -> dict:
    if access_token is None:
        return {"@context": CONTEXT, "type": "AuthAccessTokenError2", "profile": "missingAspect",
                "messageId": message_id, "heading": _text(HEADING_401),
                "note": _text("Vous n'êtes pas connecté à la salle de lecture.")}
    return {"@context": CONTEXT, "type": "AuthAccessToken2", "accessToken": access_token,
            "expiresIn": expires_in, "messageId": message_id}


class AccessTokens:
    """Probe-only tokens, each bound to the session that asked for it (its token digest is
    resolved again at every probe, so a withdrawn token or an ended session ends them too)."""

    def __init__(self, ttl_s: float = TOKEN_TTL_S):
        self.ttl_s = ttl_s
        self._by_token: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._lock = threading.Lock()

    def mint(self, session_id: str) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._by_token[token] = (session_id, time.monotonic() + self.ttl_s)
            while len(self._by_token) > MAX_TOKENS:
                self._by_token.popitem(last=False)
        return token

    def session(self, token: str | None) -> str | None:
        if not token or len(token) > 64:
            return None
        with self._lock:
            found = self._by_token.get(token)
            if found is None or found[1] < time.monotonic():
                self._by_token.pop(token, None)
                return None
            return found[0]


def safe_origin(origin: str) -> str | None:
    """The viewer's origin as postMessage takes it (scheme://host[:port]), or None."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/") \
            or parts.query or parts.fragment or len(origin) > 300:
        return None
    return f"{parts.scheme}://{parts.netloc}"
