"""Commands run while `mabillon serve` is up for the same home reuse it: `ask` goes to its warm
query service, flow commands report to its Prefect server (no temporary server of their own)."""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.flows.conftest import ASK_QUESTION, MABILLON, api, served_env

pytestmark = pytest.mark.slow


def mabillon(prefect_server, served_bucket, served_home, *args: str) -> subprocess.CompletedProcess:
    env = served_env(prefect_server, served_bucket)
    env.pop("PREFECT_API_URL")  # found through the home's serve-state file, not the environment
    env.pop("PREFECT_API_AUTH_STRING", None)
    return subprocess.run([str(MABILLON), *args, "--home", str(served_home)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_ask_is_answered_by_the_warm_query_service(prefect_server, served_bucket, served_home, serving):
    done = mabillon(prefect_server, served_bucket, served_home, "ask", ASK_QUESTION, "--json", "-v")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "answered by the warm query service of mabillon serve" in done.stderr
    package = json.loads(done.stdout)
    assert package["documents"] and package["record"]
    # the CLI may name a principal (it owns the state root); an unknown one is refused in words
    refused = mabillon(prefect_server, served_bucket, served_home, "ask", ASK_QUESTION, "--principal",
                       "mallory", "--json")
    assert refused.returncode == 4 and json.loads(refused.stdout)["kind"] == "access_denied"


def test_a_flow_command_reports_to_the_serve_prefect_server(prefect_server, served_bucket, served_home,
                                                            serving):
    done = mabillon(prefect_server, served_bucket, served_home, "gc", "-v")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "flow runs report to the Prefect server of mabillon serve" in done.stderr
    assert "temporary Prefect server" not in done.stderr
    with api(prefect_server) as client:
        runs = client.post("/flow_runs/filter", json={"flow_runs": {"name": {"like_": "gc"}},
                                                       "sort": "EXPECTED_START_TIME_DESC"}).json()
    assert any(r["name"] == "gc" and r["deployment_id"] is None for r in runs)
