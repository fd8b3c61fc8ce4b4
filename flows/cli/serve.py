"""`mabillon serve`: the Prefect UI and the operator deployments, until interrupted."""
from __future__ import annotations

import _thread
import argparse
import contextlib
import logging
import os
import secrets
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from schemas.settings import MabillonSettings


def register(sub, common) -> None:
    from flows.cli.main import add_command

    p = add_command(sub, common, "serve", "start a Prefect server (unless PREFECT_API_URL is set), "
                    "serve the ingest, operate, ask and evaluate deployments, and answer "
                    "`mabillon ask` warm", 'mabillon serve --drop-folder inbox/ --ingest-cron "*/15 * * * *"')
    p.add_argument("--host", help="bind address of a server started here (default: settings, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port of a server started here (default: settings, 4200)")
    p.add_argument("--drop-folder", help="folder or s3://bucket/prefix ingested by the scheduled-ingest "
                                         "deployment")
    p.add_argument("--uri-list", help="file of paths / file:// / s3:// URIs ingested by scheduled-ingest")
    p.add_argument("--ingest-cron", help='schedule of scheduled-ingest, e.g. "*/15 * * * *"')
    p.add_argument("--limit", type=int, help="flow runs executed at once by this process")
    p.add_argument("--no-auth", action="store_true",
                   help="start the server without Prefect's basic authentication (loopback only)")
    p.add_argument("--reading-room-port", type=int,
                   help="port of the reading room started beside the deployments (default: settings, 4300)")
    p.add_argument("--no-reading-room", action="store_true", help="do not start the reading room")
    p.add_argument("--work-pool", help="register the deployments to this process work pool on the "
                                       "server PREFECT_API_URL names and return: its workers run "
                                       "them (deploy/stack.py starts both)")
    p.set_defaults(func=cmd_serve)


def serve_settings_from(args: argparse.Namespace, settings: MabillonSettings) -> MabillonSettings:
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port),
                                   ("drop_folder", drop_folder_from(args.drop_folder)),
                                   ("uri_list", Path(args.uri_list).resolve() if args.uri_list else None),
                                   ("ingest_cron", args.ingest_cron),
                                   ("work_pool", getattr(args, "work_pool", None))) if v is not None}
    return settings.model_copy(update={"serve": settings.serve.model_copy(update=overrides)})


def drop_folder_from(value: str | None) -> str | None:
    """A local folder is made absolute (flow runs may start elsewhere); a URI is kept as given."""
    if not value or "://" in value:
        return value or None
    return str(Path(value).resolve())


def auth_string_for(args: argparse.Namespace, settings: MabillonSettings) -> str | None:
    """The basic-auth string of a server started here: the configured one, else a new one."""
    if getattr(args, "no_auth", False):
        if settings.serve.host not in ("127.0.0.1", "localhost", "::1"):
            from flows.cli.errors import CliError, Exit

            raise CliError(f"--no-auth on {settings.serve.host} would let anyone on the network "
                           "act as an operator", Exit.USAGE, "bind 127.0.0.1, or keep the authentication")
        return None
    if settings.serve.auth_string is not None:
        return settings.serve.auth_string.get_secret_value()
    return os.environ.get("PREFECT_SERVER_API_AUTH_STRING") or f"mabillon:{secrets.token_urlsafe(18)}"


def cmd_serve(args: argparse.Namespace, settings: MabillonSettings) -> int:
    """Start, in order: the Prefect server (or use PREFECT_API_URL's), the reading room, the warm
    query service, the serve-state file, then register and serve the deployments; stop in
    reverse. Each part is a context in one ExitStack, so adding one is one more line."""
    from flows.prefect_server import start_server
    from flows.run_logging import HANDLER_ENV

    logging.getLogger("flows").setLevel(logging.INFO)
    settings = serve_settings_from(args, settings)
    if settings.serve.work_pool:
        return register_to_work_pool(settings)
    # Flow runs are child processes that build their settings from the environment.
    os.environ["MABILLON_HOME"] = str(settings.home)
    os.environ.update(HANDLER_ENV)  # runs log to the UI without tracebacks or server paths
    with contextlib.ExitStack() as stack:
        api_url = os.environ.get("PREFECT_API_URL")
        auth = os.environ.get("PREFECT_API_AUTH_STRING") if api_url else None
        made_up = False  # an auth string made up here is printed once; a given one never
        if not api_url:
            made_up = settings.serve.auth_string is None and not os.environ.get(
                "PREFECT_SERVER_API_AUTH_STRING") and not getattr(args, "no_auth", False)
            auth = auth_string_for(args, settings)
            home = prefect_home(settings)  # the home's own database: its UI shows only its runs
            server = start_server(settings.serve.host, settings.serve.port, home / "mabillon-server.log",
                                  prefect_home=home, auth_string=auth)
            stack.callback(server.stop)
            api_url = server.api_url
            # before Prefect is imported here: its client reads these once
            os.environ.update(server.client_env())
        room_url = None
        if not args.no_reading_room:
            room_url = stack.enter_context(reading_room_beside(args, settings, api_url)).url
        service = stack.enter_context(query_service(settings))
        stack.enter_context(serve_state(settings, api_url, auth, service))
        from flows.serve import build_deployments, serve_deployments

        deployments = build_deployments(settings)
        ui = api_url.removesuffix("/api")
        names = ", ".join(f"{d.flow_name}/{d.name}" for d in deployments)
        sys.stdout.write(f"Prefect UI: {ui}\n"
                         + (f"sign in with: {auth}  (kept in {settings.manifests}/.serve.json)\n"
                            if made_up else "")
                         + f"serving: {names}\n"
                         + (f"reading room: {os.environ['MABILLON_READING_ROOM__URL']}\n"
                            if room_url else ""))
        sys.stdout.flush()
        # SIGTERM stops like Ctrl-C, so the server started here never outlives this process.
        stop = StopOnSignal()
        signal.signal(signal.SIGTERM, stop)
        stack.callback(stop.end)
        try:
            serve_deployments(deployments, api_url, args.limit, settings)
        except KeyboardInterrupt:
            pass  # a requested stop is a clean exit
    return 0


def prefect_home(settings: MabillonSettings) -> Path:
    """The Prefect home of the server started here, and where its logs go: PREFECT_HOME as the
    command adopted it (flows/cli/prefect_api.py: the environment's, else the home's own)."""
    return Path(os.environ.get("PREFECT_HOME") or settings.prefect_home)


@contextlib.contextmanager
def query_service(settings: MabillonSettings):
    if not settings.serve.query_service:
        yield None
        return
    from flows.query_service import QueryService

    service = QueryService(settings).start()
    try:
        yield service
    finally:
        service.stop()


@contextlib.contextmanager
def serve_state(settings: MabillonSettings, api_url: str, auth: str | None, service):
    """The home's serve-state file, for the commands run while this serve is up."""
    import socket
    from datetime import datetime, timezone

    from schemas.serving import ServeState
    from tasks.store.serve_state import clear_serve_state, write_serve_state

    settings.manifests.mkdir(parents=True, exist_ok=True)
    write_serve_state(settings.manifests, ServeState(
        pid=os.getpid(), host=socket.gethostname(), started_at=datetime.now(timezone.utc),
        home=str(settings.home), api_url=api_url, ui_url=api_url.removesuffix("/api"),
        api_auth_string=auth, query_url=service.url if service else None,
        query_key=service.key if service else None))
    try:
        yield
    finally:
        clear_serve_state(settings.manifests, os.getpid())


@contextlib.contextmanager
def reading_room_beside(args: argparse.Namespace, settings: MabillonSettings, api_url: str):
    """The reading room in its own process; ask runs (its question box and the deployments')
    link to it, since both take MABILLON_READING_ROOM__URL from this environment."""
    from flows.serve import start_reading_room

    rr = settings.reading_room
    port = args.reading_room_port or rr.port
    env = {**os.environ, "PREFECT_API_URL": api_url}
    room = start_reading_room(settings.home, rr.host, port,
                              prefect_home(settings) / "mabillon-reading-room.log", env)
    os.environ.setdefault("MABILLON_READING_ROOM__URL", rr.url or room.url)
    try:
        yield room
    finally:
        room.stop()


def register_to_work_pool(settings: MabillonSettings) -> int:
    """`serve --work-pool`: register the deployments for the pool's workers; start nothing."""
    from flows.serve import build_deployments, configured_api_url, register_to_pool

    api_url = configured_api_url()
    if api_url is None:
        from flows.cli.errors import CliError, Exit

        raise CliError("--work-pool registers to a running server: set PREFECT_API_URL to the "
                       "server whose workers poll the pool", Exit.USAGE, "deploy/stack.py prints it")
    names = register_to_pool(build_deployments(settings), api_url, settings.serve.work_pool,
                             settings.home)
    sys.stdout.write(f"Prefect UI: {api_url.removesuffix('/api')}\n"
                     f"registered to work pool {settings.serve.work_pool}: {', '.join(names)}\n")
    return 0


class StopOnSignal:
    """SIGTERM handler: interrupt serving, and keep interrupting until it has ended.

    Prefect's runner can absorb one KeyboardInterrupt (seen when the signal lands while it is
    still starting its loops); a container stop then waits out its grace period and kills the
    worker. So after the first signal the interrupt is repeated every `repeat_s` seconds until
    serving has returned (`end()`). `interrupt` is injectable so the repeat can be counted.
    """

    def __init__(self, repeat_s: float = 5.0, interrupt: Callable[[], None] | None = None):
        self.repeat_s = repeat_s
        self.interrupt = interrupt or (lambda: _thread.interrupt_main(signal.SIGTERM))
        self.repeater: threading.Thread | None = None  # armed by the first signal, once
        self.repeats = 0
        self._ended = threading.Event()

    @property
    def serving(self) -> bool:
        return not self._ended.is_set()

    def end(self) -> None:
        """Serving has returned: signals stop interrupting, and the repeat stops at once."""
        self._ended.set()

    def __call__(self, signum, frame) -> None:
        if not self.serving:
            return  # cleaning up: let the server stop undisturbed
        if self.repeater is None:
            self.repeater = threading.Thread(target=self._repeat, name="serve-stop", daemon=True)
            self.repeater.start()
        raise KeyboardInterrupt

    def _repeat(self) -> None:
        # the wait returns at once when serving ends, so no interrupt lands on the cleanup
        while not self._ended.wait(self.repeat_s):
            self.repeats += 1
            self.interrupt()
