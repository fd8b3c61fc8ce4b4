"""`mabillon reading-room`: IIIF images and manifests, evidence and document pages, a question box."""
from __future__ import annotations

import argparse
import logging
import sys

from schemas.settings import MabillonSettings


def register(sub, common) -> None:
    from flows.cli.main import add_command

    p = add_command(sub, common, "reading-room", "serve the reading room: evidence shown on the "
                    "page it came from, IIIF for every page, authorized on every request",
                    "mabillon reading-room --port 4300")
    p.add_argument("--host", help="bind address (default: settings, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: settings, 4300)")
    p.set_defaults(func=cmd_reading_room)


def reading_room_settings(args: argparse.Namespace, settings: MabillonSettings) -> MabillonSettings:
    rr = settings.reading_room
    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    rr = rr.model_copy(update=overrides)
    if rr.url is None:  # links (pages, manifests, the ask artifact) name where this one listens
        host = "127.0.0.1" if rr.host in ("0.0.0.0", "::", "") else rr.host
        rr = rr.model_copy(update={"url": f"http://{host}:{rr.port}"})
    return settings.model_copy(update={"reading_room": rr})


def server_log(verbose: bool) -> None:
    """A server's log on stderr: our loggers with time, level and traceback (the CLI's one-line
    form drops tracebacks). Our loggers do not propagate, so Prefect's logging set-up, done when
    the first question imports it, does not reach them: errors stay logged after it."""
    from flows.cli.quiet import OUR_LOGGERS

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in OUR_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.DEBUG if verbose else logging.INFO)
        logger.propagate = False


def cmd_reading_room(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.cli.prefect_api import connect
    from flows.reading_room import serve_reading_room

    server_log(getattr(args, "verbose", False) or getattr(args, "debug", False))
    settings = reading_room_settings(args, settings)
    rr = settings.reading_room
    # Before Prefect is imported: the question box's runs report to PREFECT_API_URL, the home's
    # `mabillon serve`, or a temporary server of ours that dies with this process (never
    # Prefect's own, which a SIGTERM left running, re-parented to init).
    link = connect(settings)
    ready = link.server.wait_healthy if link.server is not None else None
    sys.stdout.write(f"reading room: {rr.url} (listening on {rr.host}:{rr.port})\n")
    sys.stdout.flush()
    try:
        serve_reading_room(settings, rr.host, rr.port, prefect_ready=ready)
    except KeyboardInterrupt:
        pass  # SIGINT or SIGTERM: a requested stop, after uvicorn's graceful shutdown
    finally:
        link.close()
        if link.server is not None:
            link.server.stop()
    return 0
