"""Parse untrusted bytes in a child process with limits: one file's crash is that file's refusal.

pymupdf, libtesseract and docling's backends are native code; a malformed file can make them
segfault, abort or allocate without bound, which in-process would take the whole batch (or the
worker) down. `parse_untrusted` is a drop-in for `parse_revision` that runs it in a reused child
process (`python -m tasks.ingest.sandbox`); the parse stage calls nothing else to read a unit
of pages (tasks/ingest/parse/units.py), on either task runner. So

- a crash by signal quarantines the file: "parser crashed: SIGSEGV";
- memory: the address space a parse may add is capped (RLIMIT_AS, reset before each file above
  what the child already holds, so loading docling once does not eat the next file's budget):
  "over the 2 GiB memory limit";
- CPU time (RLIMIT_CPU, per file) and wall time (the parent kills the child) are capped, and
  so are open files (RLIMIT_NOFILE);

and the next file gets a fresh child. The limits are `settings.sandbox` (recorded in each
generation's manifest). The child is started with subprocess, not multiprocessing: a Dask
worker is a daemonic process, which multiprocessing forbids to have children; each worker
process (or each thread of the local runner) has a child of its own, which ends when its parent
does (end of file on its input). It is reused across files (loading the parsers and tesseract's
engines costs seconds) and recycled after `recycle_after` files.

Protocol: the child's original stdout and stdin carry length-prefixed pickles (parsers that
print are redirected to stderr); a request is (entry point, data, revision, settings, pages,
limits) — `pages`: the 1-based pages of a paged format to read, None for all —
a reply is ("ok", ParsedDocument) | ("refused", reason) | ("memory", detail) | ("error", text).
"""
from __future__ import annotations

import atexit
import pkgutil
import logging
import os
import pickle
import resource
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, BinaryIO

from schemas.lineage import ParsedDocument, Revision
from schemas.settings import ParseSettings, SandboxSettings
from tasks.ingest.parse.errors import ParseRefused

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">Q")
# Deaths the same bytes cause again (a parser bug they trigger, the CPU limit); a SIGKILL may be
# the machine's out-of-memory killer, and an exit without a signal is not the file's doing.
_LASTING_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE,
                    signal.SIGXCPU}


def parse_untrusted(data: bytes, revision: Revision, settings: ParseSettings,
                    pages: Sequence[int] | None = None) -> ParsedDocument:
    """`parse_revision`, in a child process under `settings.sandbox` (in-process when disabled).

    Raises ParseRefused with the reason when the parser refuses the file, crashes, or runs
    past a limit; the caller quarantines it and goes on with the batch.
    """
    limits = settings.sandbox
    if not limits.enabled:
        return call_parser(limits.parser, data, revision, settings, pages)
    worker = _POOL.take(limits)
    try:
        reply = worker.run(limits, data, revision, settings, pages)
    except ParseRefused:
        _POOL.discard(worker)  # it crashed or was killed: the next file gets a new one
        raise
    except BaseException:
        _POOL.discard(worker)
        raise
    _POOL.give_back(worker, limits, healthy=reply[0] in ("ok", "refused", "error"))
    kind, value = reply
    if kind == "ok":
        return value
    if kind == "refused":
        raise ParseRefused(value)
    if kind == "memory":
        raise ParseRefused(f"over the {size_label(limits.max_memory_bytes)} memory limit "
                           f"(sandbox.max_memory_bytes): {value}")
    raise ParseRefused(f"parser error: {value}", lasting=False)  # a bug: fixed, it may read


def resolve(entry: str):
    return pkgutil.resolve_name(entry)  # "module:function"


def call_parser(entry: str, data: bytes, revision: Revision, settings: ParseSettings,
                pages: Sequence[int] | None) -> ParsedDocument:
    # the pages only when some are chosen: an entry point for whole files takes three arguments
    parser = resolve(entry)
    return parser(data, revision, settings) if pages is None else parser(data, revision, settings, pages)


def size_label(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# ---- parent side ------------------------------------------------------------------------------

@dataclass
class Worker:
    process: subprocess.Popen
    key: tuple
    files: int = 0

    @classmethod
    def start(cls, limits: SandboxSettings) -> "Worker":
        process = subprocess.Popen(
            [sys.executable, "-m", "tasks.ingest.sandbox", str(limits.max_open_files)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, bufsize=0,
            cwd=_PROJECT_ROOT, env=_child_env())
        return cls(process, _key(limits))

    def run(self, limits: SandboxSettings, data: bytes, revision: Revision, settings: ParseSettings,
            pages: Sequence[int] | None = None) -> tuple[str, Any]:
        request = (limits.parser, data, revision, settings, None if pages is None else list(pages),
                   (limits.max_memory_bytes, limits.max_cpu_s))
        self.files += 1
        try:
            _send(self.process.stdin, request)
            reply = _receive(self.process.stdout, limits.max_wall_s)
        except TimeoutError:
            self.kill()
            raise ParseRefused(f"parser ran past the wall-time limit of {limits.max_wall_s} s "
                               "(sandbox.max_wall_s)", lasting=False) from None  # a busy machine?
        except (EOFError, BrokenPipeError, OSError):
            code = self.process.wait(timeout=30)
            raise ParseRefused(self.death(code, limits), lasting=-code in _LASTING_SIGNALS) from None
        return reply

    @staticmethod
    def death(code: int, limits: SandboxSettings) -> str:
        if code == -signal.SIGXCPU:
            return f"parser ran past the CPU-time limit of {limits.max_cpu_s} s (sandbox.max_cpu_s)"
        if code < 0:
            return f"parser crashed: {signal_name(-code)}"
        return f"parser exited with status {code} before answering"

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass

    def stop(self) -> None:
        """Close its input (it exits at end of file); kill it if it does not go."""
        try:
            self.process.stdin.close()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


def _key(limits: SandboxSettings) -> tuple:
    # the limits a child sets once at start; the others are sent with each request
    return (limits.max_open_files,)


class WorkerPool:
    """Idle children, reused across files and across concurrent callers (one child per caller)."""

    def __init__(self) -> None:
        self._idle: list[Worker] = []
        self._lock = threading.Lock()
        self.started = 0

    def take(self, limits: SandboxSettings) -> Worker:
        key = _key(limits)
        with self._lock:
            for worker in list(self._idle):
                self._idle.remove(worker)
                if worker.key == key and worker.alive():
                    return worker
                worker.stop()
            self.started += 1
        return Worker.start(limits)

    def give_back(self, worker: Worker, limits: SandboxSettings, healthy: bool) -> None:
        if not healthy or not worker.alive() or worker.files >= limits.recycle_after:
            worker.stop()
            return
        with self._lock:
            self._idle.append(worker)

    def discard(self, worker: Worker) -> None:
        worker.kill()

    def shutdown(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()


_POOL = WorkerPool()
atexit.register(_POOL.shutdown)
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# Set by Dask's nanny in its workers so that freed memory goes back to the OS at once, which
# its memory monitor reads. Inherited by a parser child it made each page's image buffers go back
# and come again: 19 % more CPU per OCR page (3.96 s against 3.33 s for 8 pages, measured alone).
# The child's memory is bounded by its own limit (sandbox.max_memory_bytes), not by that monitor.
PARENT_ONLY_ENV = ("MALLOC_TRIM_THRESHOLD_",)


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PARENT_ONLY_ENV}
    env["PYTHONPATH"] = _python_path()
    return env


def _python_path() -> str:
    """The child imports what the parent can (the project root first: entry points such as a
    test's parser live beside `tasks`)."""
    return os.pathsep.join(dict.fromkeys([_PROJECT_ROOT, *(p for p in sys.path if p)]))


def _send(pipe: BinaryIO, value: Any) -> None:
    blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(_HEADER.pack(len(blob)))
    pipe.write(blob)
    pipe.flush()


def _read_exactly(pipe: BinaryIO, n: int, deadline: float | None) -> bytes:
    chunks, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([pipe], [], [], wait)[0]:
                raise TimeoutError
        chunk = pipe.read(min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(pipe: BinaryIO, wall_s: float | None = None) -> Any:
    deadline = time.monotonic() + wall_s if wall_s else None
    (size,) = _HEADER.unpack(_read_exactly(pipe, _HEADER.size, deadline))
    return pickle.loads(_read_exactly(pipe, size, deadline))


# ---- child side -------------------------------------------------------------------------------

def _current_address_space() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * resource.getpagesize()


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _limit_next_file(max_memory: int, max_cpu_s: int) -> None:
    """Soft limits for the coming file, above what the child already holds and has used (hard
    limits stay open, so the next file can be given its own budget again)."""
    unlimited = resource.RLIM_INFINITY
    resource.setrlimit(resource.RLIMIT_AS, (_current_address_space() + max_memory, unlimited))
    resource.setrlimit(resource.RLIMIT_CPU, (int(_cpu_used()) + 1 + max_cpu_s, unlimited))


def _serve(max_open_files: int) -> None:
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # a parser that prints writes to stderr, not into the replies
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max_open_files, hard), hard))
    from tasks.ingest.parse import parser_for

    while True:
        try:
            entry, data, revision, settings, pages, (max_memory, max_cpu_s) = _receive(requests)
        except EOFError:
            return
        # the file's parser is imported before its limit: a library mapped under the cap fails
        # to load (and a child that reads only exports never loads pymupdf or docling)
        parser_for(revision.media_type)
        _limit_next_file(max_memory, max_cpu_s)
        try:
            reply: tuple[str, Any] = ("ok", call_parser(entry, data, revision, settings, pages))
        except ParseRefused as exc:
            reply = ("refused", str(exc))
        except MemoryError as exc:
            reply = ("memory", f"{type(exc).__name__} {exc}".strip())
        except OSError as exc:
            reply = (("refused", f"parser opened more than {max_open_files} files (sandbox.max_open_files)")
                     if exc.errno == 24 else ("error", f"{type(exc).__name__}: {exc}"))
        except Exception as exc:  # a parser bug on one file: reported, the child goes on
            logging.getLogger("tasks.ingest.sandbox").exception("parser failed")
            reply = ("error", f"{type(exc).__name__}: {exc}")
        del data
        try:
            _send(replies, reply)
        except MemoryError:  # the answer itself did not fit: the limit was reached all the same
            _send(replies, ("memory", "the parsed result does not fit"))
        if reply[0] == "memory":
            return  # a child that ran out of memory is not trusted with another file


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
