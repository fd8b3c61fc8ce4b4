"""Hand freed heap pages back to the operating system after a large transient allocation.

Loading a generation's metadata scans a million rows through Lance (Rust, glibc malloc) and
Arrow (mimalloc): once the compact view is built, ~230 MB of freed pages at 1M chunks stay with
the process — glibc and mimalloc keep them for reuse — and a serving process is judged by its
resident memory (docs/benchmarks.md).
"""
from __future__ import annotations

import ctypes
import ctypes.util

import pyarrow as pa


def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()  # None off glibc (musl, macOS): nothing to trim there


def release_freed_memory() -> None:
    """Return free pages of Arrow's pool and of glibc's heap to the OS (no live data moves)."""
    pa.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
