"""The release slot belongs to one home, frees itself when its holder dies, and a command that
waits for it says who holds it; the tombstone list has a lock of its own."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tasks.store import serialise
from tasks.store.atomic import LockTimeout
from tasks.store.layout import StoreLayout
from tasks.store.serialise import holder_path, holder_words, read_holder, serialised_release
from tasks.store.tombstones import add_tombstones, mark_purged, read_tombstones

HOLD = """
import sys, time
from pathlib import Path
from tasks.store.layout import StoreLayout
from tasks.store.serialise import serialised_release
root = Path(sys.argv[1])
layout = StoreLayout(warehouse=root / "warehouse", manifests=root / "manifests")
with serialised_release(layout):
    print("held", flush=True)
    time.sleep(600)
"""


def layout_of(root: Path) -> StoreLayout:
    return StoreLayout(warehouse=root / "warehouse", manifests=root / "manifests")


def test_each_home_has_its_own_slot(tmp_path: Path):
    a, b = layout_of(tmp_path / "a"), layout_of(tmp_path / "b")
    with serialised_release(a), serialised_release(b, timeout_s=0):
        pass


def test_a_holder_killed_with_sigkill_frees_the_slot_at_once(tmp_path: Path):
    """No lease to run out, no server to ask: the kernel drops a dead process's lock."""
    layout = layout_of(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE,
                              cwd=Path(__file__).parents[2])
    try:
        assert holder.stdout.readline() == b"held\n"
        with pytest.raises(LockTimeout):  # held while it lives
            with serialised_release(layout, timeout_s=0):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    stale = read_holder(layout)  # its record stays behind, and says it is gone
    assert stale["pid"] == holder.pid and "no longer running" in holder_words(stale)
    with serialised_release(layout, timeout_s=0):  # taken at the first try
        assert read_holder(layout)["pid"] == os.getpid()


def test_the_holder_is_recorded_and_cleared(tmp_path: Path):
    layout = layout_of(tmp_path)
    with serialised_release(layout):
        holder = json.loads(holder_path(layout).read_text())
        assert holder["pid"] > 0 and holder["command"]
    assert not holder_path(layout).exists()


def test_a_waiting_command_names_the_holder_and_gives_up_in_words(tmp_path: Path, monkeypatch, caplog):
    layout = layout_of(tmp_path)
    monkeypatch.setattr(serialise, "WAIT_NOTICE_S", 0.2)
    holding, release = threading.Event(), threading.Event()

    def hold():
        with serialised_release(layout):
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(10)
    try:
        with caplog.at_level(logging.WARNING, logger="tasks.store.serialise"):
            with pytest.raises(LockTimeout) as refused:
                with serialised_release(layout, timeout_s=1.0):
                    pass
    finally:
        release.set()
        holder.join(10)
    notice = [r.getMessage() for r in caplog.records if "waiting for the release slot" in r.getMessage()]
    assert len(notice) == 1 and f"pid {os.getpid()}" in notice[0]  # the holder: this process
    assert f"`{os.path.basename(sys.argv[0])}" in notice[0]  # its command line (pytest's own)
    assert str(refused.value).endswith("retry when it ends") and "held the release slot" in str(refused.value)


def test_tombstones_are_added_while_the_release_slot_is_held_and_none_is_lost(tmp_path: Path):
    """A deletion masks without waiting for a release, and concurrent writers of the list
    (deletes adding, a purge marking) each keep what the others wrote."""
    layout = layout_of(tmp_path)
    ids = [[f"doc-{w}-{i}" for i in range(5)] for w in range(6)]

    def add(batch: list[str]) -> None:
        for d in batch:
            add_tombstones(layout, [d], "tester", "test")
            mark_purged(layout, {d})

    with serialised_release(layout):  # a release runs meanwhile
        writers = [threading.Thread(target=add, args=(batch,)) for batch in ids]
        for w in writers:
            w.start()
        for w in writers:
            w.join(60)
    tombstones = read_tombstones(layout).tombstones
    assert sorted(t.doc_id for t in tombstones) == sorted(d for batch in ids for d in batch)
    assert all(t.pending and t.purged_at is not None for t in tombstones)
