"""A gated release killed at any point — after publishing staged, while it waits for a person,
or with the approval in hand just before the switch — leaves the previous routing intact."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from schemas.settings import PROJECT_ROOT
from tests.conftest import SAMPLE_RECORDS, write_records
from tests.flows.conftest import form_shown, free_port

pytestmark = pytest.mark.slow
NEW = {"doc_id": "temps-1887-03-09", "corpus": "le_temps", "date": "1887-03-09",
       "text": "Le Temps. La discussion sur les blés reprend; M. Méline répond aux députés de la Brie."}


@pytest.fixture(scope="module")
def own_server(tmp_path_factory):
    """A server of its own: the runs killed here stay on it (paused, running), and must not show
    in the other tests' lists of paused runs."""
    from flows.serve import start_server

    root = tmp_path_factory.mktemp("crash-server")
    server = start_server("127.0.0.1", free_port(), root / "server.log", prefect_home=root / "home")
    yield server
    server.stop()


def _cli(home: Path, api_url: str, args: list[str], crash_point: str | None = None, **popen):
    env = {**os.environ, "MABILLON_HOME": str(home), "PREFECT_API_URL": api_url, "MABILLON_GATE__POLL_S": "1"}
    env.pop("MABILLON_TEST_CRASH_POINT", None)
    if crash_point:
        env["MABILLON_TEST_CRASH_POINT"] = crash_point
    return subprocess.Popen([sys.executable, "-m", "flows.cli", *args], cwd=PROJECT_ROOT, env=env,
                            start_new_session=True, **popen)


def _paused(api_url: str) -> list[dict]:
    return httpx.post(f"{api_url}/flow_runs/filter", timeout=10,
                      json={"flow_runs": {"state": {"type": {"any_": ["PAUSED"]}}}}).json()


def _paused_run(server, proc: subprocess.Popen, before: set[str], timeout_s: float = 600) -> dict:
    """The run this test paused, once its form is shown (a run killed while paused by another
    case stays paused)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the gated release ended before pausing"
        rows = [r for r in _paused(server.api_url) if r["id"] not in before
                and form_shown(server, r["id"], r["state"]["state_details"].get("run_input_keyset"))]
        if rows:
            return rows[0]
        time.sleep(1)
    raise TimeoutError("the gated release never paused")


def _wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, "the run ended before its crash point"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def base_home(tmp_path_factory) -> Path:
    """g0001 serving, published in this process (the model stays loaded), copied by each case."""
    from flows.release import release
    from tests.conftest import settings_for

    root = tmp_path_factory.mktemp("crash-base")
    release(paths=[str(write_records(root / "a.jsonl", SAMPLE_RECORDS))], settings=settings_for(root / "home"))
    return root / "home"


@pytest.mark.parametrize("point", ["gate-shadow", "paused", "gate-switch"])
def test_a_gated_release_killed_anywhere_leaves_routing_intact(point, own_server, base_home, tmp_path):
    home = shutil.copytree(base_home, tmp_path / "home")
    routing = home / "manifests" / "routing.json"
    routing_before = routing.read_bytes()
    stale = {r["id"] for r in _paused(own_server.api_url)}

    gated = _cli(home, own_server.api_url, ["ingest", str(write_records(tmp_path / "b.jsonl", [NEW])), "--gate"],
                 crash_point=None if point == "paused" else point,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if point == "gate-switch":  # the approval arrives, and the run dies before the rename
            run = _paused_run(own_server, gated, stale)
            answer = {"generation": "g0002", "decision": "approve", "reason": "looks right"}
            assert httpx.post(f"{own_server.api_url}/flow_runs/{run['id']}/resume", json={"run_input": answer},
                              timeout=10).json()["status"] == "ACCEPT"
        if point == "paused":
            _paused_run(own_server, gated, stale)
        else:
            _wait_for(home / "manifests" / f".at-crash-point-{point}", gated)
    finally:
        os.killpg(gated.pid, signal.SIGKILL)
        gated.wait()

    assert routing.read_bytes() == routing_before  # nothing switched, nothing half-written
    assert json.loads(routing_before)["serving"] == "g0001"
    assert (home / "manifests" / "generations" / "g0002.yaml").exists()  # the candidate stays staged
    assert not list((home / "manifests").glob("releases/g0002-*.yaml"))
    # nothing is left locked: an operator can still promote the staged candidate by hand at once,
    # the slot the killed run held freed with its process (issue 32's bound: two minutes)
    promote = _cli(home, own_server.api_url, ["promote", "g0002", "--reason", "after the crash", "--json"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = promote.communicate(timeout=120)
    assert promote.returncode == 0, err.decode()[-2000:]
    assert json.loads(out)["serving"] == "g0002"
