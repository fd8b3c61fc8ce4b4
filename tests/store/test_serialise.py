"""The release slot belongs to one home, and a command that waits for it says who holds it."""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path

import pytest

from tasks.store import serialise
from tasks.store.atomic import LockTimeout
from tasks.store.layout import StoreLayout
from tasks.store.serialise import holder_path, release_limit_name, serialised_release


def layout_of(root: Path) -> StoreLayout:
    return StoreLayout(warehouse=root / "warehouse", manifests=root / "manifests")


def test_each_home_has_its_own_concurrency_limit(tmp_path: Path):
    a, b = layout_of(tmp_path / "a"), layout_of(tmp_path / "b")
    assert release_limit_name(a) != release_limit_name(b)
    assert release_limit_name(a) == release_limit_name(layout_of(tmp_path / "a"))
    assert release_limit_name(a).startswith("mabillon-release-")


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
