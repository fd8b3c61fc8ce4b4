"""`mabillon reading-room`: IIIF images and manifests, evidence and document pages, a question box."""
from __future__ import annotations

import argparse
import logging
import os
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


def cmd_reading_room(args: argparse.Namespace, settings: MabillonSettings) -> int:
    from flows.reading_room import serve_reading_room

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # Without PREFECT_API_URL the question box starts Prefect's local API on first use; on a
    # busy machine that takes longer than Prefect's default 20 s wait.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    settings = reading_room_settings(args, settings)
    rr = settings.reading_room
    sys.stdout.write(f"reading room: {rr.url} (listening on {rr.host}:{rr.port})\n")
    sys.stdout.flush()
    serve_reading_room(settings, rr.host, rr.port)
    return 0
