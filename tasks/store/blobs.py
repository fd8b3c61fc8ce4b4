"""Content-addressed source bytes: the path of a blob is its SHA-256."""
from __future__ import annotations

import hashlib

from tasks.store.layout import StoreLayout
from tasks.store.location import Location


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put_blob(layout: StoreLayout, data: bytes) -> tuple[str, Location]:
    """Store bytes once; storing the same bytes again is a no-op."""
    digest = sha256_hex(data)
    location = layout.blob_path(digest)
    if not location.exists():
        location.write_bytes(data)
    return digest, location


def read_blob(layout: StoreLayout, digest: str) -> bytes:
    data = layout.blob_path(digest).read_bytes()
    if sha256_hex(data) != digest:
        raise IOError(f"blob {digest} is corrupt in the store ({layout.blob_path(digest)})")
    return data


def remove_blobs(layout: StoreLayout, keep: set[str], only: set[str] | None = None) -> int:
    """Blobs whose digest is not in `keep` (given `only`, just those of its digests): how many
    were removed."""
    removed = 0
    for blob in layout.blobs.files():
        if blob.name not in keep and (only is None or blob.name in only):
            blob.unlink()
            removed += 1
    return removed
