"""A test-only parser that really crashes, for the sandbox: the first bytes of a file say how.

`SEGV` dereferences NULL through ctypes (a real SIGSEGV), `ABRT` calls abort(), `ALLOC` grows
a list of buffers until allocation fails, `SPIN` burns CPU, `HANG` sleeps, `FILES` opens files
until the descriptor limit, `EXIT` leaves the process with status 3. Anything else goes to
the real `parse_revision`.
"""
from __future__ import annotations

import ctypes
import os
import time

import numpy

from tasks.ingest.parse import parse_revision

ENTRY = "tests.hostile.crashers:parse"


def parse(data, revision, settings, pages=None):
    head = data[:8]
    if head.startswith(b"SEGV"):
        ctypes.string_at(0)
    if head.startswith(b"ABRT"):
        os.abort()
    if head.startswith(b"ALLOC"):
        hoard = []
        while True:  # untouched pages: the address space runs out, not this machine's memory
            hoard.append(numpy.empty(64 << 20, numpy.uint8))
    if head.startswith(b"SPIN"):
        while True:
            pass
    if head.startswith(b"HANG"):
        time.sleep(3600)
    if head.startswith(b"FILES"):
        handles = [open(os.devnull) for _ in range(100_000)]
        return handles
    if head.startswith(b"EXIT"):
        os._exit(3)
    return parse_revision(data, revision, settings, pages)
