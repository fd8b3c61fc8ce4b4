"""Crash points: named places in a release where a crash-safety test can stop it and kill it.

A test hook, configured once by the entry point (`arm`, from settings.test_crash_point, i.e.
MABILLON_TEST_CRASH_POINT) for the whole process, and for the Dask workers of the run
(`ArmWorkers`, flows/runner.py): the stages only name their points, they are given nothing.
"""
from __future__ import annotations

import logging
import os
import time

from tasks.store.atomic import atomic_write_text
from tasks.store.layout import StoreLayout

log = logging.getLogger(__name__)
_armed: str | None = None  # the one point this process stops at (None: off)


def arm(point: str | None) -> None:
    """Stop this process at `point` (None: at none); the entry point's call, once per run."""
    global _armed
    _armed = point


def armed() -> str | None:
    return _armed


def crash_point(layout: StoreLayout, name: str) -> None:
    """Test hook: stop at a named point and wait to be killed (crash-safety tests), or to be let
    go on (a test that does something while a release holds the slot, then lets it finish).

    Off unless `name` is the armed point. Writes a marker holding the pid of the process that
    stopped, so the test knows the run got there and whom to kill: the whole release, or only
    the Dask worker running the task. A point stops once per state root: a task run again after
    its worker was killed goes on, as it would after a real crash. The run goes on when the
    test writes `.go-on-<name>` beside the marker.
    """
    if _armed != name:
        return
    marker = layout.manifests / f".at-crash-point-{name}"
    if marker.exists():
        return
    atomic_write_text(marker, str(os.getpid()))
    log.warning("stopped at crash point %s (test hook), pid %d", name, os.getpid())
    while not (layout.manifests / f".go-on-{name}").exists():
        time.sleep(0.2)
    log.warning("going on from crash point %s (test hook)", name)
