"""Starting and stopping a Prefect server process (`mabillon serve`, the tests, the benchmarks).

Imports nothing of Prefect: a command that only needs to know where a server is, or to start
one in the background, does not pay for importing it.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

log = logging.getLogger(__name__)

# Run in the child before exec'ing the server: SIGTERM when the starting process dies, even by
# SIGKILL, so no server outlives `mabillon serve` or a test session. (An exec wrapper rather than
# preexec_fn: preexec_fn forces a Python-level fork, which lancedb's fork hooks warn about.)
DIE_WITH_PARENT = ("import ctypes, os, signal, sys; "
                   "ctypes.CDLL(None).prctl(1, signal.SIGTERM); "  # 1 = PR_SET_PDEATHSIG
                   "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


def free_port() -> int:
    """A loopback port free now (the OS picks it), for a server started next."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PrefectServer:
    api_url: str
    process: subprocess.Popen | None = None  # None: a server we did not start
    auth_string: str | None = None  # PREFECT_SERVER_API_AUTH_STRING it was started with

    @property
    def ui_url(self) -> str:
        return self.api_url.removesuffix("/api")

    def client_env(self) -> dict[str, str]:
        """What a client process needs in its environment to use this server."""
        env = {"PREFECT_API_URL": self.api_url}
        if self.auth_string:
            env["PREFECT_API_AUTH_STRING"] = self.auth_string
        return env

    def stop(self, timeout_s: float = 20) -> None:
        """Stop the server and its workers (the whole process group)."""
        stop_group(self.process, timeout_s)


def stop_group(process: subprocess.Popen | None, timeout_s: float = 20) -> None:
    """SIGTERM a child's process group, SIGKILL it if it has not gone within `timeout_s`."""
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout_s)


def private_dir(path: Path) -> Path:
    """Create a Prefect home owner-only: its database holds run parameters (questions asked)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def api_url_for(host: str, port: int) -> str:
    # The browser calls the API at this address; a wildcard bind is reached via loopback.
    reachable = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{reachable}:{port}/api"


def basic_auth_header(auth_string: str | None) -> dict[str, str]:
    if not auth_string:
        return {}
    import base64

    return {"Authorization": "Basic " + base64.b64encode(auth_string.encode()).decode()}


def wait_healthy(api_url: str, timeout_s: float, process: subprocess.Popen | None = None,
                 auth_string: str | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"Prefect server exited with code {process.returncode} before it "
                               f"answered at {api_url}; see its log")
        try:
            if httpx.get(f"{api_url}/health", timeout=2,
                         headers=basic_auth_header(auth_string)).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"Prefect server did not answer at {api_url} within {timeout_s:.0f}s")


def start_server(host: str, port: int, log_path: Path, prefect_home: Path | None = None,
                 timeout_s: float = 120, auth_string: str | None = None) -> PrefectServer:
    """Start `prefect server start` in its own process group and wait until it answers.

    PREFECT_UI_API_URL must name the server's own API: the UI bundle defaults to port 4200 and
    otherwise shows an error and no data. With `auth_string` ("user:password") the API and the UI
    ask for it (Prefect's PREFECT_SERVER_API_AUTH_STRING); clients send it as
    PREFECT_API_AUTH_STRING.
    """
    api_url = api_url_for(host, port)
    env = {**os.environ, "PREFECT_API_URL": api_url, "PREFECT_UI_API_URL": api_url,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    if auth_string:
        env["PREFECT_SERVER_API_AUTH_STRING"] = auth_string
        env["PREFECT_API_AUTH_STRING"] = auth_string
    if prefect_home is not None:
        env["PREFECT_HOME"] = str(private_dir(prefect_home))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as sink:
        process = subprocess.Popen(
            [sys.executable, *(("-c", DIE_WITH_PARENT) if sys.platform == "linux" else ()),
             "-m", "prefect", "server", "start", "--host", host, "--port", str(port)],
            env=env, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    server = PrefectServer(api_url=api_url, process=process, auth_string=auth_string)
    try:
        wait_healthy(api_url, timeout_s, process, auth_string)
    except BaseException:
        server.stop()
        raise
    log.info("Prefect server at %s (log %s)", server.ui_url, log_path)
    return server
