"""Which Prefect server a command's flow runs report to, chosen before Prefect is imported,
and where its state lives (`adopt_prefect_home`: the home's own, never one shared by all homes).

1. `PREFECT_API_URL` set: that server (a deployment's own).
2. A `mabillon serve` running for the same home: its server (and its auth string), found through
   the home's serve-state file, answering its health check within half a second.
3. Otherwise Prefect's temporary server, started once per command, in the background as soon as
   the command knows it needs one, so that it starts while the command loads its modules.

Read-only commands (generations, lineage, diff, documents) never call this: they read the state
files directly and never import Prefect.
"""
from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from schemas.serving import ServeState
from schemas.settings import MabillonSettings

log = logging.getLogger(__name__)
HEALTH_TIMEOUT_S = 0.5


@dataclass
class PrefectLink:
    source: str  # "environment" | "serve" | "temporary" | "in-process"
    api_url: str | None
    serve: ServeState | None = None
    server: "TemporaryServer | None" = None
    auth_string: str | None = None
    _env_before: dict | None = None
    _settings_context = None

    def ready(self) -> None:
        """Wait until the temporary server (if any) answers, and point Prefect's settings at the
        chosen server for the rest of the command (the environment alone is read only when
        Prefect is first imported; a process may run several commands, as the tests do)."""
        if self.server is not None:
            self.server.wait_healthy()
        if self.source == "environment" or self._settings_context is not None:
            return
        from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

        # Heartbeats let a long-lived server notice a crashed run; a server that lives only as long
        # as this command has no such service, and their thread costs each flow run up to 1 s
        # at its end (Prefect joins it after its current 1-s sleep).
        beats = {} if self.source == "serve" else {"flows.heartbeat_frequency": None}
        if self.api_url is None:  # Prefect's own temporary server of this process
            context = temporary_settings(beats, restore_defaults={PREFECT_API_URL, PREFECT_API_AUTH_STRING})
        else:
            context = temporary_settings({PREFECT_API_URL: self.api_url,
                                          PREFECT_API_AUTH_STRING: self.auth_string, **beats})
        context.__enter__()
        self._settings_context = context

    def close(self) -> None:
        if self.server is not None:
            flush_to_api()  # logs and events of the runs reach the server before it stops
        if self._settings_context is not None:
            self._settings_context.__exit__(None, None, None)
            self._settings_context = None
        for key, value in (self._env_before or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def __enter__(self) -> "PrefectLink":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TemporaryServer:
    """Prefect's API server for this process, as Prefect's own temporary server runs it (uvicorn,
    no UI, no background services), but started by us at once, before Prefect is imported, and
    stopped at exit without Prefect's 5-second grace wait (its SQLite database survives a kill).
    One per process, like Prefect's own: Prefect's client services keep the first server they
    talk to, so a process that runs several commands (the tests) keeps one server for all."""

    _shared: "TemporaryServer | None" = None

    @classmethod
    def shared(cls) -> "TemporaryServer":
        if cls._shared is None or cls._shared.process.poll() is not None:
            import atexit

            cls._shared = cls()
            atexit.register(cls._shared.stop)
        return cls._shared

    def __init__(self):
        import subprocess

        from flows.prefect_server import DIE_WITH_PARENT, free_port, private_dir

        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        import importlib.util

        app_dir = Path(importlib.util.find_spec("prefect").origin).parent.parent
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
               "PREFECT__SERVER_FINAL": "1", "PREFECT_API_URL": self.api_url}
        if env.get("PREFECT_HOME"):  # its SQLite database goes there (the home's own: main())
            private_dir(Path(env["PREFECT_HOME"]))
        self.process = subprocess.Popen(
            [sys.executable, "-c", DIE_WITH_PARENT, "-m", "uvicorn", "--app-dir", str(app_dir),
             "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "error", "--lifespan", "on"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True)

    def wait_healthy(self, timeout_s: float = 120) -> None:
        import time

        deadline = time.monotonic() + timeout_s
        while not answers(self.api_url, timeout_s=1):
            if self.process.poll() is not None:
                tail = (self.process.stderr.read() or b"").decode(errors="replace")[-800:]
                raise ConnectionError(f"Prefect's temporary server exited with code "
                                      f"{self.process.returncode}: {tail.strip()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"Prefect's temporary server did not answer within {timeout_s:.0f} s")
            time.sleep(0.1)

    def stop(self, grace_s: float = 0.2) -> None:
        # The runs were flushed to it (PrefectLink.close); SQLite commits survive a kill, so it
        # gets a moment for a clean exit, not the second uvicorn takes to drain.
        import signal
        import subprocess

        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)


def flush_to_api() -> None:
    if "prefect" not in sys.modules:
        return
    try:
        from prefect.events.worker import EventsWorker
        from prefect.logging.handlers import APILogHandler

        APILogHandler.flush()
        EventsWorker.drain_all()
    except Exception:  # best effort: the command's result does not depend on it
        pass


def running_serve(settings: MabillonSettings) -> ServeState | None:
    """The `mabillon serve` of this home, if one is up and its Prefect API answers."""
    from tasks.store.serve_state import read_serve_state

    state = read_serve_state(settings.manifests)
    if state is None:
        return None
    return state if answers(state.api_url, state.api_auth_string) else None


def answers(api_url: str, auth=None, timeout_s: float = HEALTH_TIMEOUT_S) -> bool:
    import httpx

    from flows.prefect_server import basic_auth_header

    raw = auth.get_secret_value() if hasattr(auth, "get_secret_value") else auth
    try:
        return httpx.get(f"{api_url}/health", timeout=timeout_s,
                         headers=basic_auth_header(raw)).status_code == 200
    except httpx.HTTPError:
        return False


def connect(settings: MabillonSettings, serve: ServeState | None = None) -> PrefectLink:
    """Point this process at a Prefect server (see the module's docstring). Call it before
    anything imports Prefect: Prefect reads its settings from the environment on import.
    The caller closes the link when the command ends (a temporary server stops then)."""
    if os.environ.get("PREFECT_API_URL"):
        return PrefectLink("environment", os.environ["PREFECT_API_URL"])
    serve = serve or running_serve(settings)
    if serve is not None:
        auth = serve.api_auth_string.get_secret_value() if serve.api_auth_string else None
        env = {"PREFECT_API_URL": serve.api_url, **({"PREFECT_API_AUTH_STRING": auth} if auth else {})}
        log.info("flow runs report to the Prefect server of mabillon serve (pid %s) at %s",
                 serve.pid, serve.api_url)
        return PrefectLink("serve", serve.api_url, serve, auth_string=auth, _env_before=_set_env(env))
    if "prefect" in sys.modules and TemporaryServer._shared is None:
        return PrefectLink("in-process", None)  # a process running Prefect already (the tests)
    server = TemporaryServer.shared()
    log.info("flow runs report to a temporary Prefect server at %s", server.api_url)
    return PrefectLink("temporary", server.api_url, server=server,
                       _env_before=_set_env({"PREFECT_API_URL": server.api_url}))


def adopt_prefect_home(home_prefect: Path) -> Path:
    """Give this process, and every process it starts, its home's own Prefect state.

    Which Prefect database a command's runs land in, in order:
    1. PREFECT_API_URL set: that server's (a deployment's worker, deploy/stack.py, the tests'
       session server); it keeps its own database, wherever it runs.
    2. PREFECT_HOME set in the environment: kept as given (the tests' per-worker home, a work
       pool's workers); a user who sets it chooses to share it.
    3. Otherwise the home's own, `<home>/.prefect` (`home_prefect`): the temporary server of a
       CLI command, `mabillon serve`'s server and the flow runs it starts all keep this home's
       runs, artifacts and logs there. Never `~/.prefect`, which every home would share, so that
       one home's UI listed another's runs and questions (issue 32). Prefect's profiles are read
       from there too, not from `~/.prefect/profiles.toml`.
    Prefect reads PREFECT_HOME once, when it is imported: a process that has imported it already
    (the tests, which set their own) is left as it is. Returns the Prefect home in force.
    """
    if "PREFECT_HOME" not in os.environ and "prefect" not in sys.modules:
        os.environ["PREFECT_HOME"] = str(home_prefect)
    return Path(os.environ.get("PREFECT_HOME") or home_prefect)


def _set_env(values: dict[str, str]) -> dict[str, str | None]:
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    return before
