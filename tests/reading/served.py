"""A reading room served over real HTTP on loopback, in a thread of the test process: uvicorn
with the room's own app, stopped by the test that started it."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import httpx

from flows.reading_room import create_app
from schemas.settings import MabillonSettings
from tests.flows.conftest import free_port


@contextmanager
def served_room(settings: MabillonSettings):
    """Yields the room's base URL (http://127.0.0.1:PORT) while it serves."""
    import uvicorn

    port = free_port()
    settings = settings.model_copy(update={"reading_room": settings.reading_room.model_copy(
        update={"url": f"http://127.0.0.1:{port}"})})
    server = uvicorn.Server(uvicorn.Config(create_app(settings, warm=False), host="127.0.0.1",
                                           port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, name="test-reading-room", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert thread.is_alive() and time.monotonic() < deadline, "reading room did not start"
            time.sleep(0.1)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=15)
