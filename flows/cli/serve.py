"""`mabillon serve`: the Prefect UI and the operator deployments, until interrupted."""
from __future__ import annotations

import _thread
import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from schemas.settings import MabillonSettings


def register(sub, common) -> None:
    p = sub.add_parser("serve", parents=[common],
                       help="start a Prefect server (unless PREFECT_API_URL is set) and serve the "
                            "ingest, operate, ask and evaluate deployments")
    p.add_argument("--host", help="bind address of a server started here (default: settings, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port of a server started here (default: settings, 4200)")
    p.add_argument("--drop-folder", help="folder or s3://bucket/prefix ingested by the scheduled-ingest "
                                         "deployment")
    p.add_argument("--uri-list", help="file of paths / file:// / s3:// URIs ingested by scheduled-ingest")
    p.add_argument("--ingest-cron", help='schedule of scheduled-ingest, e.g. "*/15 * * * *"')
    p.add_argument("--limit", type=int, help="flow runs executed at once by this process")
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


def cmd_serve(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from prefect.settings import PREFECT_HOME

    from flows.serve import build_deployments, configured_api_url, serve_deployments, start_server

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = serve_settings_from(args, settings)
    if settings.serve.work_pool:
        return register_to_work_pool(settings)
    # Flow runs are child processes that build their settings from the environment.
    os.environ["MABILLON_HOME"] = str(settings.home)
    api_url, server = configured_api_url(), None
    if api_url is None:
        log_path = Path(PREFECT_HOME.value()) / "mabillon-server.log"
        server = start_server(settings.serve.host, settings.serve.port, log_path)
        api_url = server.api_url
    reading_room = None
    if not args.no_reading_room:
        try:
            reading_room = start_reading_room_beside(args, settings, api_url)
        except BaseException:
            if server is not None:
                server.stop()
            raise
    deployments = build_deployments(settings.serve)
    names = ", ".join(f"{d.flow_name}/{d.name}" for d in deployments)
    sys.stdout.write(f"Prefect UI: {api_url.removesuffix('/api')}\nserving: {names}\n")
    if reading_room is not None:
        sys.stdout.write(f"reading room: {os.environ['MABILLON_READING_ROOM__URL']}\n")
    sys.stdout.flush()
    # SIGTERM stops like Ctrl-C, so the server started here never outlives this process.
    stop = StopOnSignal()
    signal.signal(signal.SIGTERM, stop)
    try:
        serve_deployments(deployments, api_url, args.limit)
    except KeyboardInterrupt:
        pass  # a requested stop is a clean exit
    finally:
        stop.serving = False
        if reading_room is not None:
            reading_room.stop()
        if server is not None:
            server.stop()
    return 0


def start_reading_room_beside(args: argparse.Namespace, settings: MabillonSettings, api_url: str):
    """The reading room in its own process; ask runs (its question box and the deployments')
    link to it, since both take MABILLON_READING_ROOM__URL from this environment."""
    from prefect.settings import PREFECT_HOME

    from flows.serve import start_reading_room

    rr = settings.reading_room
    port = args.reading_room_port or rr.port
    env = {**os.environ, "PREFECT_API_URL": api_url}
    room = start_reading_room(settings.home, rr.host, port,
                              Path(PREFECT_HOME.value()) / "mabillon-reading-room.log", env)
    os.environ.setdefault("MABILLON_READING_ROOM__URL", rr.url or room.url)
    return room


def register_to_work_pool(settings: MabillonSettings) -> int:
    """`serve --work-pool`: register the deployments for the pool's workers; start nothing."""
    from flows.serve import build_deployments, configured_api_url, register_to_pool

    api_url = configured_api_url()
    if api_url is None:
        raise ValueError("--work-pool registers to a running server: set PREFECT_API_URL to the "
                         "server whose workers poll the pool (deploy/stack.py prints it)")
    names = register_to_pool(build_deployments(settings.serve), api_url, settings.serve.work_pool,
                             settings.home)
    sys.stdout.write(f"Prefect UI: {api_url.removesuffix('/api')}\n"
                     f"registered to work pool {settings.serve.work_pool}: {', '.join(names)}\n")
    return 0


class StopOnSignal:
    """SIGTERM handler: interrupt serving, and keep interrupting until it has ended.

    Prefect's runner can absorb one KeyboardInterrupt (seen when the signal lands while it is
    still starting its loops); a container stop then waits out its grace period and kills the
    worker. So after the first signal the interrupt is repeated every `repeat_s` seconds until
    serving has returned.
    """

    def __init__(self, repeat_s: float = 5.0):
        self.repeat_s = repeat_s
        self.serving = True
        self._repeating = False

    def __call__(self, signum, frame) -> None:
        if not self.serving:
            return  # cleaning up: let the server stop undisturbed
        if not self._repeating:
            self._repeating = True
            threading.Thread(target=self._repeat, name="serve-stop", daemon=True).start()
        raise KeyboardInterrupt

    def _repeat(self) -> None:
        while True:
            time.sleep(self.repeat_s)
            if not self.serving:
                return
            _thread.interrupt_main(signal.SIGTERM)
