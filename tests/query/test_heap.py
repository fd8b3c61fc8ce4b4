"""Freed heap pages go back to the OS once a large transient allocation is over."""
from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from tasks import heap


def _anon_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(heap._LIBC is None, reason="glibc only: elsewhere there is nothing to trim")
def test_pages_freed_below_a_live_allocation_are_returned():
    libc = heap._LIBC
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block = 64 << 10  # under glibc's mmap threshold: these live on the heap, as Lance's scans do
    blocks = [libc.malloc(block) for _ in range(3200)]  # 200 MB
    for b in blocks:
        ctypes.memset(b, 1, block)
    sentinel = libc.malloc(block)  # still live above them: free alone cannot shrink the heap
    ctypes.memset(sentinel, 1, block)
    for b in blocks:
        libc.free(b)
    held = _anon_mb()
    heap.release_freed_memory()
    after = _anon_mb()
    libc.free(sentinel)
    assert held - after > 150, (held, after)
