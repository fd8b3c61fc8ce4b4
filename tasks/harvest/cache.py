"""What a harvest fetched, kept in the home: content-addressed answers and an index by request.

`blobs/sha256/ab/cdef…` holds each answer's bytes under their SHA-256; `index/<sha256 of the
request key>` names the blob a request was answered with. Both are written to a temporary file
and renamed, blob first, so a harvest killed at any instant leaves only whole answers behind:
a rerun finds every answer that was fetched and asks Gallica only for the rest.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from tasks.store.atomic import atomic_write_bytes


class FetchCache:
    def __init__(self, root: Path):
        self.root = root

    def _index(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        return self.root / "index" / digest[:2] / digest

    def blob(self, digest: str) -> Path:
        return self.root / "blobs" / "sha256" / digest[:2] / digest

    def get(self, key: str) -> bytes | None:
        """The answer kept for `key`, or None (never fetched, or its blob is gone)."""
        try:
            digest = self._index(key).read_text("ascii").strip()
            data = self.blob(digest).read_bytes()
        except FileNotFoundError:
            return None
        # a blob is never rewritten; one that does not hash to its name was damaged on disk
        return data if hashlib.sha256(data).hexdigest() == digest else None

    def put(self, key: str, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        blob = self.blob(digest)
        if not blob.exists():
            atomic_write_bytes(blob, data)
        atomic_write_bytes(self._index(key), digest.encode("ascii"))
        return digest
