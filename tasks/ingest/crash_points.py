"""Crash points: named places in a release where a crash-safety test can stop it and kill it."""
from __future__ import annotations

import logging
import os
import time

from schemas.settings import MabillonSettings
from tasks.store.atomic import atomic_write_text
from tasks.store.layout import StoreLayout

log = logging.getLogger(__name__)


def crash_point(settings: MabillonSettings, layout: StoreLayout, name: str) -> None:
    """Test hook: stop at a named point and wait to be killed (crash-safety tests).

    Writes a marker so the test knows the run reached the point. Off unless configured.
    """
    if settings.test_crash_point != name:
        return
    atomic_write_text(layout.manifests / f".at-crash-point-{name}", str(os.getpid()))
    log.warning("stopped at crash point %s (test hook), pid %d", name, os.getpid())
    while True:
        time.sleep(1)

