"""tests/warm_cli.py: a command of ours forked warm is the command a cold start would have been
(its argv, directory, environment, streams, exit code, session), killable as any process; what
must start cold does."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import warm_cli

PROBE = [sys.executable, "-m", "tests.warm_probe"]


def warm(test):
    """Slow, as the other tests of processes: ~30 s together, and one starts a second zygote
    (torch & co. imported again, ~14 CPU-s)."""
    skip = pytest.mark.skipif(warm_cli._zygote is None, reason="MABILLON_TEST_COLD_CLI: every command starts cold")
    return pytest.mark.slow(skip(test))


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@warm
def test_a_forked_command_has_its_argv_directory_environment_streams_and_exit_code(tmp_path: Path):
    done = subprocess.run([*PROBE, "0", "3"], cwd=tmp_path, env={**os.environ, "WARM_PROBE": "é"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["argv"], seen["cwd"], seen["probe"]) == (["0", "3"], str(tmp_path), "é")
    assert done.stderr == "probe: on stderr\n"
    # forked from the warm parent: torch is already there, our own modules are not
    assert seen["torch"] and not seen["flows"]


@warm
def test_kill_9_of_the_group_reaches_the_forked_command_and_its_status_is_the_signal():
    with subprocess.Popen([*PROBE, "120", "0"], stdout=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        assert isinstance(proc, warm_cli.WarmPopen) and proc._warm is not None
        seen = json.loads(proc.stdout.readline())
        assert seen["pid"] == proc.pid and seen["pgid"] == proc.pid  # a session of its own
        assert proc.poll() is None
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    with subprocess.Popen([*PROBE, "120", "0"], stdout=subprocess.PIPE, text=True) as proc:
        seen = json.loads(proc.stdout.readline())
        assert seen["pgid"] != proc.pid  # without start_new_session: not a group leader
        proc.kill()
        assert proc.wait(30) == -signal.SIGKILL


@warm
def test_a_timeout_kills_the_forked_command():
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([*PROBE, "120", "0"], capture_output=True, timeout=5)
    assert time.monotonic() - started < 60


@warm
def test_a_dead_zygote_is_replaced_on_the_next_command():
    subprocess.run([*PROBE, "0", "0"], capture_output=True, timeout=300)  # it runs
    zygote = warm_cli._zygote._process
    zygote.kill()
    zygote.wait(30)
    done = subprocess.run([*PROBE, "0", "5"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 5, done.stderr
    assert warm_cli._zygote._process.pid != zygote.pid and json.loads(done.stdout)["torch"]


@warm
def test_a_garbled_request_is_refused_and_the_zygote_serves_on():
    import socket

    subprocess.run([*PROBE, "0", "0"], capture_output=True, timeout=300)  # the zygote runs
    zygote = warm_cli._zygote._process
    with socket.socket(socket.AF_UNIX) as client:  # a header, then no descriptors and no JSON
        client.connect(str(warm_cli._zygote.socket_path))
        client.sendall(warm_cli._HEADER.pack(5) + b"hello")
    done = subprocess.run([*PROBE, "0", "4"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 4 and json.loads(done.stdout)["torch"], done.stderr
    assert zygote.poll() is None and warm_cli._zygote._process is zygote  # the same one, not a successor


@warm
def test_a_read_only_command_starts_no_zygote_but_forks_from_a_running_one(monkeypatch):
    unstarted = warm_cli._Zygote()  # as in a test process that has started no command yet
    monkeypatch.setattr(warm_cli, "_zygote", unstarted)
    try:
        cold = subprocess.run([*PROBE, "0", "0", "documents"], capture_output=True, text=True, timeout=300)
        assert not json.loads(cold.stdout)["torch"] and not unstarted.running()  # cold, and no zygote for it
    finally:
        unstarted.stop()
    monkeypatch.undo()
    subprocess.run([*PROBE, "0", "0"], capture_output=True, timeout=300)  # another command: the zygote runs
    forked = subprocess.run([*PROBE, "0", "0", "lineage"], capture_output=True, text=True, timeout=300)
    assert json.loads(forked.stdout)["torch"] and warm_cli._zygote.running()


def test_only_our_plain_commands_are_forked():
    mabillon = str(warm_cli.MABILLON)
    assert warm_cli.warm_target([sys.executable, "-m", "flows.cli", "ingest", "x"])["kind"] == "module"
    assert warm_cli.warm_target([mabillon, "documents", "--json"])["kind"] == "script"
    for cold in ([mabillon, "serve", "--home", "h"], [sys.executable, "-m", "flows.cli", "reading-room"],
                 [mabillon, "-v", "ingest", "x"], [mabillon, "ingest", "x", "--debug"],
                 [sys.executable, "-c", "print(1)"], [sys.executable, "-m", "prefect.engine"],
                 [sys.executable, "-m", "tasks.ingest.sandbox", "256"], ["tesseract", "a.png", "-"],
                 f"{mabillon} documents", []):
        assert warm_cli.warm_target(cold) is None, cold
