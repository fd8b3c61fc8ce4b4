"""Content-addressed source bytes: the path of a blob is its SHA-256."""
from __future__ import annotations

import hashlib
from pathlib import Path

from tasks.store.atomic import atomic_write_bytes
from tasks.store.layout import StoreLayout


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put_blob(layout: StoreLayout, data: bytes) -> tuple[str, Path]:
    """Store bytes once; storing the same bytes again is a no-op."""
    digest = sha256_hex(data)
    path = layout.blob_path(digest)
    if not path.exists():
        atomic_write_bytes(path, data)
    return digest, path


def read_blob(layout: StoreLayout, digest: str) -> bytes:
    data = layout.blob_path(digest).read_bytes()
    if sha256_hex(data) != digest:
        raise IOError(f"blob {digest} is corrupt on disk")
    return data
