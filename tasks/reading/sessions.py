"""Sign-in sessions of the reading room: the cookie holds a random session id, never the token.

`/login` checks the token once and keeps only its SHA-256 here, under a fresh 256-bit id; each
request resolves that digest against principals.json again (tasks.access.principals), so a
token withdrawn there signs its sessions out at once. Sessions live in the room's memory: a
restart signs everyone out, and nothing on disk or in the browser can be replayed as the token.
"""
from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict

SESSION_COOKIE = "mabillon_session"
MAX_SESSIONS = 10_000  # the oldest sign-in is dropped beyond this


class Sessions:
    def __init__(self, lifetime_s: float, max_sessions: int = MAX_SESSIONS):
        self.lifetime_s = lifetime_s
        self.max_sessions = max_sessions
        self._by_id: OrderedDict[str, tuple[str, float]] = OrderedDict()  # id → (digest, expiry)
        self._lock = threading.Lock()

    def open(self, digest: str) -> str:
        """A new session for the token whose digest is given; its id, for the cookie."""
        session_id = secrets.token_urlsafe(32)
        with self._lock:
            self._by_id[session_id] = (digest, time.monotonic() + self.lifetime_s)
            while len(self._by_id) > self.max_sessions:
                self._by_id.popitem(last=False)
        return session_id

    def digest(self, session_id: str | None) -> str | None:
        """The token digest of a live session; None for an unknown, expired or malformed id."""
        if not session_id or len(session_id) > 64:
            return None
        with self._lock:
            found = self._by_id.get(session_id)
            if found is None:
                return None
            if found[1] < time.monotonic():
                del self._by_id[session_id]
                return None
            return found[0]

    def close(self, session_id: str | None) -> None:
        if session_id:
            with self._lock:
                self._by_id.pop(session_id, None)
