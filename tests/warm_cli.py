"""The tests' `mabillon` commands start from a warm parent instead of a cold interpreter.

Each command a test starts (`python -m flows.cli …`, the `mabillon` script, the kill harness)
spent ~14 of its ~20 CPU-seconds importing torch, transformers, sentence-transformers, Great
Expectations, scipy and Lance before doing anything (issue 31's CPU account: 59 commands, ~500
CPU-s of a suite bound by 2 cores). Here one process per test process
(the "zygote") imports those libraries once, then forks a command per request; the command is a
real process with its own pid, session, stdio, environment and working directory, so `kill -9`,
`killpg`, exit codes and pipes behave as for a cold start.

What stays cold, and why:
- the zygote imports only third-party libraries that read nothing per command from the
  environment (dask's configuration, which does, is read again in the child); never Prefect,
  which fixes its settings (API URL, home) at import, nor our own modules, nor the two that start
  threads at import, which a fork loses: lancedb (its event loop) and a plain `import pymupdf`
  (onnxruntime, for its add-ons; a forked command then hung at exit);
- `-v`/`--debug` commands (the libraries' import-time logging switches are the quiet ones);
- the services, `serve` and `reading-room` (COLD_COMMANDS), and the tests' own serve harness;
- what asyncio starts (it waits with os.waitpid, which a forked command's real parent answers);
- anything else (`-c` code, servers, tesseract): `subprocess.Popen` as usual.
`MABILLON_TEST_COLD_CLI=1` starts every command cold, as before.

The command's parent is a small "minder" forked by the zygote, which waits for it and sends its
wait status back over the request's socket; `WarmPopen` reads it there, so `wait`, `poll`,
`communicate` and timeouts are subprocess.Popen's own.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# Imported by the zygote before it forks. Each is read-only after import for what the commands
# do, and starts no thread at import (checked at start: the zygote refuses to serve otherwise).
WARM_IMPORTS = ("numpy", "scipy", "sklearn", "pandas", "pyarrow", "torch", "transformers",
                "sentence_transformers", "great_expectations", "lance", "wordfreq",
                "sqlalchemy", "fastapi", "httpx", "pydantic", "pydantic_settings", "uvicorn",
                "anyio", "dask", "distributed", "jsonschema", "yaml", "boto3", "rich")
# `python -m <these>`: the command line, the kill harness, and tests/test_warm_cli.py's probe
WARM_MODULES = ("flows.cli", "tests.hostile.crash_release", "tests.warm_probe")
# Services stay cold: tests stop them with signals, and their shutdown should not carry libraries
# they would not have loaded (seen: a reading room, SIGTERMed while forked, aborted with
# "FATAL: exception not rethrown" instead of exiting 0)
COLD_COMMANDS = {"serve", "reading-room"}
# The read-only commands import none of WARM_IMPORTS (test_cli_errors checks it): a cold one costs
# ~1 CPU-s, the zygote ~14. They fork only from a zygote already running, never start one
# (`make test-fast` started one for two `lineage`/`documents` calls and nothing else).
READ_ONLY_COMMANDS = {"generations", "documents", "lineage", "diff"}
LOUD_FLAGS = {"-v", "--verbose", "--debug"}
MABILLON = Path(sys.executable).with_name("mabillon")
_PLAIN_POPEN = subprocess.Popen
_HEADER = struct.Struct("!I")
_STATUS = struct.Struct("!i")


def warm_target(args) -> dict | None:
    """How to run `args` in a forked child, or None when it must start cold."""
    if isinstance(args, (str, bytes)) or not args:
        return None
    argv = [os.fspath(a) for a in args]
    if LOUD_FLAGS.intersection(argv) or COLD_COMMANDS.intersection(argv[1:]):
        return None
    if Path(argv[0]) == MABILLON:
        return {"kind": "script", "target": argv[0], "argv": argv}
    if argv[0] == sys.executable and len(argv) >= 3 and argv[1] == "-m" and argv[2] in WARM_MODULES:
        return {"kind": "module", "target": argv[2], "argv": [argv[2], *argv[3:]]}
    return None


class WarmPopen(_PLAIN_POPEN):
    """subprocess.Popen, except that a command of ours forks from the zygote."""

    _warm: _Command | None = None

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                       startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite,
                       errread, errwrite, restore_signals, gid, gids, uid, umask,
                       start_new_session, process_group):
        plain = (shell or executable is not None or preexec_fn is not None or pass_fds
                 or gid is not None or gids is not None or uid is not None or umask >= 0
                 or process_group not in (None, -1))
        # asyncio waits for its children with os.waitpid, not through Popen: a forked command is
        # the minder's child, so asyncio would see it end at once (exit 255)
        by_asyncio = sys._getframe(2).f_globals.get("__name__", "").startswith("asyncio")
        # a fork of the test process (multiprocessing's fork) is not the zygote's client
        ours = _zygote is not None and _zygote.owner == os.getpid()
        target = warm_target(args) if ours and not plain and not by_asyncio else None
        if target is not None and READ_ONLY_COMMANDS.intersection(target["argv"][1:]) and not _zygote.running():
            target = None
        if target is None:
            return super()._execute_child(
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                restore_signals, gid, gids, uid, umask, start_new_session, process_group)
        request = {**target, "env": dict(os.environ if env is None else env),
                   "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
                   "new_session": bool(start_new_session)}
        # -1: the child shares the test process's own stream, as a cold child inherits it
        stdio = [fd if fd != -1 else own for fd, own in ((p2cread, 0), (c2pwrite, 1), (errwrite, 2))]
        self._warm = _zygote.start(request, stdio)
        self.pid = self._warm.pid
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _internal_poll(self, _deadstate=None, **kwargs):
        if self._warm is None:
            return super()._internal_poll(_deadstate, **kwargs)
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                if self.returncode is None:
                    status = self._warm.status(block=False)
                    if status is not None:
                        self._handle_exitstatus(status)
            finally:
                self._waitpid_lock.release()
        return self.returncode

    def _try_wait(self, wait_flags):
        if self._warm is None:
            return super()._try_wait(wait_flags)
        status = self._warm.status(block=not wait_flags & os.WNOHANG)
        return (0, 0) if status is None else (self.pid, status)


class _Command:
    """One forked command: its pid, and the socket its minder reports the wait status on."""

    def __init__(self, conn: socket.socket):
        self._conn = conn
        self.pid = _STATUS.unpack(_recv_exact(conn, _STATUS.size))[0]
        self._status: int | None = None

    def status(self, block: bool) -> int | None:
        if self._status is None and (block or select.select([self._conn], [], [], 0)[0]):
            self._status = _STATUS.unpack(_recv_exact(self._conn, _STATUS.size))[0]
            self._conn.close()
        return self._status


class _Zygote:
    """The client side: starts the zygote on first use, asks it for commands."""

    def __init__(self):
        self.owner = os.getpid()
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._folder = Path(tempfile.mkdtemp(prefix="mabillon-zygote-"))
        self.socket_path = self._folder / "zygote.sock"

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _ensure(self) -> None:
        with self._lock:
            if self.running():
                return
            self.socket_path.unlink(missing_ok=True)  # a dead zygote's: wait for the new one's
            log = (self._folder / "zygote.log").open("ab")
            self._process = _PLAIN_POPEN(  # the one cold start
                [sys.executable, "-m", __spec__.name, str(self.socket_path)],
                cwd=Path(__file__).resolve().parent.parent, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=log)
            log.close()
            deadline = time.monotonic() + 300
            while not self.socket_path.exists():
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the CLI zygote did not start: {self._folder / 'zygote.log'}")
                time.sleep(0.05)

    def start(self, request: dict, stdio: list[int]) -> _Command:
        self._ensure()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(self.socket_path))
        body = json.dumps(request).encode()
        socket.send_fds(conn, [_HEADER.pack(len(body))], stdio)
        conn.sendall(body)
        return _Command(conn)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._folder, ignore_errors=True)


_zygote: _Zygote | None = None


def install() -> None:
    """From here on, this process's `subprocess.Popen` (and `subprocess.run`) start our commands warm."""
    global _zygote
    if _zygote is None and not os.environ.get("MABILLON_TEST_COLD_CLI"):
        _zygote = _Zygote()
        subprocess.Popen = WarmPopen


def uninstall() -> None:
    global _zygote
    if _zygote is not None:
        subprocess.Popen = _PLAIN_POPEN
        _zygote.stop()
        _zygote = None


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        part = conn.recv(size - len(data))
        if not part:
            raise ConnectionError("the CLI zygote closed the connection before the command's status")
        data += part
    return data


# --- the zygote -----------------------------------------------------------------------------

def _serve(path: str) -> dict:
    """Import, then answer requests until a forked command returns here with its request."""
    from flows.cli.quiet import OFFLINE_ENV, QUIET_ENV

    for key, value in {**OFFLINE_ENV, **QUIET_ENV}.items():  # as the command would, before imports
        os.environ.setdefault(key, value)
    for name in ("flows.cli.quiet", "flows.cli", "flows"):  # each command imports ours afresh
        del sys.modules[name]
    import importlib

    for name in WARM_IMPORTS:
        importlib.import_module(name)
    if threading.active_count() != 1:  # a Python thread would be missing in every child
        raise SystemExit(f"the CLI zygote has {threading.enumerate()} after its imports: forking is unsafe")
    print(f"zygote {os.getpid()} of {os.getppid()} ({os.environ.get('PYTEST_XDIST_WORKER', 'no worker')}): "
          f"imported {len(sys.modules)} modules, "
          f"{len(os.listdir('/proc/self/task'))} native threads", file=sys.stderr, flush=True)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the minders
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    os.rename(path + ".tmp", path)  # the client waits for the name: bound and listening
    listener.listen(64)
    listener.settimeout(5)
    parent = os.getppid()
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the test process is gone
                os._exit(0)
            continue
        conn.settimeout(None)
        fds: list[int] = []
        try:
            head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
            request = json.loads(_recv_exact(conn, _HEADER.unpack(head)[0]))
            if len(fds) != 3:
                raise ValueError(f"{len(fds)} file descriptors, not stdin, stdout and stderr")
        except (OSError, ValueError, struct.error) as exc:  # a client gone or garbled: the next one
            print(f"zygote: request refused: {exc}", file=sys.stderr, flush=True)
            conn.close()
            for fd in fds:
                os.close(fd)
            continue
        if os.fork() == 0:
            listener.close()
            return _minder(conn, fds, request)
        conn.close()
        for fd in fds:
            os.close(fd)


def _minder(conn: socket.socket, fds: list[int], request: dict) -> dict:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        conn.close()
        if request["new_session"]:
            os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        return request
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(_STATUS.pack(pid))
        _, status = os.waitpid(pid, 0)
        conn.sendall(_STATUS.pack(status))
    finally:
        os._exit(0)


def _run(request: dict) -> None:
    """Become the command: its environment, directory and argv, then run it as Python would."""
    import runpy

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    import dask.config

    dask.config.refresh()  # dask read DASK_* when the zygote imported it
    sys.argv = list(request["argv"])
    if request["kind"] == "module":
        sys.path[0] = os.getcwd()  # as `python -m` does
        runpy.run_module(request["target"], run_name="__main__", alter_sys=True)
    else:
        sys.path[0] = os.path.dirname(request["target"])
        runpy.run_path(request["target"], run_name="__main__")


if __name__ == "__main__":
    _run(_serve(sys.argv[1]))
