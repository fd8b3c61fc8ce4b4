"""Crash-safe file writes and the release lock shared by the CLI and the flows."""
from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates 0600 files; state files are shared records, readable like any other file.
FILE_MODE = 0o666 & ~_umask()


def atomic_write_bytes(path: Path, data: bytes, mode: int = FILE_MODE) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str, mode: int = FILE_MODE) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def atomic_write_parquet(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, FILE_MODE)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class LockTimeout(RuntimeError):
    """Another process holds the lock (the release slot, the tombstone list) past the timeout."""


@contextlib.contextmanager
def file_lock(lock_path: Path, timeout_s: float, busy: str) -> Iterator[None]:
    """An exclusive flock on `lock_path`: the kernel releases it when the holder's process dies,
    however it dies (SIGKILL, OOM, a lost power supply), so no holder outlives itself. Python
    opens it close-on-exec, so a child process (a parser sandbox, a server) never inherits it.
    `timeout_s` 0 tries once. `busy` is the message of the LockTimeout raised after it."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as fh:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(busy) from None
                time.sleep(0.2)
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()}\n")
            fh.flush()
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def release_lock(lock_path: Path, timeout_s: float = 600.0):
    """Serialise publish, promote, delete and gc across processes (see tasks/store/serialise.py)."""
    return file_lock(lock_path, timeout_s, f"another release or promotion holds {lock_path}; "
                                           "retry when it ends")
