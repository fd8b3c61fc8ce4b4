"""A real Prefect server and a `mabillon serve` process, shared by the deployment and UI tests.

Everything binds to loopback; every process is started in its own group and killed with it.
The server runs with Prefect's basic authentication, as `mabillon serve` and deploy/ run it:
every client here sends the auth string, and a client without it is refused.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from flows.prefect_server import free_port
from flows.serve import stop_group  # noqa: F401  (the tests stop what they start with it)
from tests.conftest import SAMPLE_RECORDS, write_records
from tests.s3 import S3Bucket

MABILLON = Path(sys.executable).with_name("mabillon")
# Tenant B's own document: it answers ASK_QUESTION best, and no one outside tenant B may see it.
TENANT_B_MARKER = "Brie-confidentiel-B"
TENANT_B_RECORD = {
    "doc_id": "tenant-b-note-1887-03-03", "corpus": "notes_privees", "date": "1887-03-03",
    "text": f"Note {TENANT_B_MARKER}: le débat sur les blés a été renvoyé à jeudi; la Chambre "
            "renvoie le débat sur les blés à jeudi, dit la note réservée du cabinet."}
SERVED = {"scheduled-ingest", "release", "harvest", "promote", "rollback", "canary", "delete", "gc", "ask", "ask-batch",
          "evaluate"}
# The served home's registered question set for gated releases (about tests.conftest.SAMPLE_RECORDS).
GATE_QUESTIONS = Path(__file__).with_name("gate_questions.jsonl")
INGEST_CRON = "0 3 * * *"
ASK_QUESTION = "Quand le débat sur les blés a-t-il été renvoyé à jeudi ?"
AUTH_STRING = "archivist:test-only-secret"
# Access tokens of principals.json in the served home (only their digests are stored there)
OPERATOR_TOKEN = "op-token-for-tests"
TENANT_B_TOKEN = "tenant-b-reader-token"


READING_ROOM_PORT = free_port()  # the reading room `mabillon serve` starts beside the deployments


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    from flows.serve import start_server

    root = tmp_path_factory.mktemp("prefect-server")
    server = start_server("127.0.0.1", free_port(), root / "server.log", prefect_home=root / "home",
                          auth_string=AUTH_STRING)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def served_bucket(s3_endpoint) -> S3Bucket:
    """The served stack keeps its warehouse on S3, as the compose stack does on MinIO."""
    bucket = S3Bucket(s3_endpoint, "mabillon-served")
    bucket.client().create_bucket(Bucket=bucket.name)
    return bucket


def served_env(prefect_server, bucket: S3Bucket) -> dict[str, str]:
    return {**os.environ, **bucket.env, **prefect_server.client_env(),
            "MABILLON_WAREHOUSE_DIR": bucket.uri("warehouse"),
            "MABILLON_GATE__QUESTIONS": str(GATE_QUESTIONS), "MABILLON_GATE__POLL_S": "1",
            # the runner of `mabillon serve` asks for scheduled runs every 10 s by default: each
            # run a test triggers would wait up to that long before it starts
            "PREFECT_RUNNER_POLL_FREQUENCY": "1"}


def api(prefect_server) -> httpx.Client:
    """An HTTP client of the test server's API, signed in."""
    from flows.prefect_server import basic_auth_header

    return httpx.Client(base_url=prefect_server.api_url, timeout=10,
                        headers=basic_auth_header(prefect_server.auth_string))


def form_shown(server, run_id, keyset: dict | None) -> bool:
    """Whether the decision form of a paused run can be read, as a person opening the run sees it.

    Prefect proposes the PAUSED state first and saves the form's schema after it
    (`prefect.flow_runs.pause_flow_run`): an answer sent in between is refused ("Run input schema
    not found"), so a test answers once the form is there, not as soon as the run is paused."""
    from flows.prefect_server import basic_auth_header

    if not keyset or "schema" not in keyset:
        return False
    response = httpx.get(f"{server.api_url}/flow_runs/{run_id}/input/{keyset['schema']}", timeout=10,
                         headers=basic_auth_header(server.auth_string))
    if response.status_code == 404:  # not saved yet
        return False
    response.raise_for_status()  # refused or failing: say so now, not as a wait that times out
    return True


def write_principals(home: Path) -> None:
    """An operator, and a reader of tenant B (its documents are not public)."""
    from tasks.access.principals import token_digest

    home.mkdir(parents=True, exist_ok=True)
    (home / "principals.json").write_text(json.dumps({
        "ops": {"tenant": "default", "groups": ["public"], "roles": ["operator"],
                "token_sha256": token_digest(OPERATOR_TOKEN)},
        "bea": {"tenant": "tenant-b", "groups": ["staff"], "token_sha256": token_digest(TENANT_B_TOKEN)},
    }), "utf-8")


@pytest.fixture(scope="session")
def served_home(tmp_path_factory, prefect_server, served_bucket) -> Path:
    """A home with one published generation of the sample records (built through the CLI);
    its warehouse is in the `served_bucket`, its manifests in the home folder."""
    root = tmp_path_factory.mktemp("served")
    records = write_records(root / "records.jsonl", SAMPLE_RECORDS)
    private = write_records(root / "tenant-b.jsonl", [TENANT_B_RECORD])
    home = root / "home"
    write_principals(home)
    env = served_env(prefect_server, served_bucket)
    for path, extra in ((records, []), (private, ["--tenant", "tenant-b", "--groups", "staff"])):
        done = subprocess.run([str(MABILLON), "ingest", str(path), "--home", str(home), *extra],
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    return home


@pytest.fixture(scope="session")
def drop_folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("drop")


@pytest.fixture(scope="session")
def serving(prefect_server, served_home, served_bucket, drop_folder):
    """`mabillon serve` against the test server, until every deployment is registered."""
    log = (served_home.parent / "serve.log").open("wb")
    env = served_env(prefect_server, served_bucket)
    process = subprocess.Popen(
        [str(MABILLON), "serve", "--home", str(served_home), "--drop-folder", str(drop_folder),
         "--ingest-cron", INGEST_CRON, "--reading-room-port", str(READING_ROOM_PORT)],
        cwd=served_home.parent,  # flow runs must not depend on the serving directory
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True)
    try:
        wait_for_deployments(prefect_server.api_url, SERVED, process, timeout_s=180)
        yield process
    finally:
        stop_group(process)
        log.close()


def wait_for_deployments(api_url: str, names: set[str], process: subprocess.Popen,
                         timeout_s: float, auth_string: str | None = AUTH_STRING) -> None:
    from flows.prefect_server import basic_auth_header

    deadline, found = time.monotonic() + timeout_s, set()
    while time.monotonic() < deadline:
        assert process.poll() is None, f"mabillon serve exited with {process.returncode}"
        try:
            found = {d["name"] for d in httpx.post(f"{api_url}/deployments/filter", json={},
                                                   headers=basic_auth_header(auth_string),
                                                   timeout=10).json()}
        except httpx.TransportError:  # a server `mabillon serve` starts itself is not up yet
            found = set()
        if names <= found:
            return
        time.sleep(1)
    raise TimeoutError(f"deployments not registered within {timeout_s}s: {names - found}")


def run_through_api(prefect_server, name: str, parameters: dict | None = None):
    """A deployment run triggered through the API (signed in), waited for."""
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: prefect_server.api_url,
                             PREFECT_API_AUTH_STRING: prefect_server.auth_string}):
        # polled every second (not every 5 s): the tests wait for a run, each poll is one request
        return run_deployment(name, parameters=parameters or {}, timeout=300, poll_interval=1)


@pytest.fixture(scope="session")
def ask_run(prefect_server, serving):
    """One `ask` deployment run triggered through the API, waited for."""
    return run_through_api(prefect_server, "ask/ask", {"params": {"question": ASK_QUESTION}})


def artifacts_of(prefect_server, flow_run_id) -> dict[str, dict]:
    with api(prefect_server) as client:
        rows = client.post("/artifacts/filter",
                           json={"artifacts": {"flow_run_id": {"any_": [str(flow_run_id)]}}}).json()
    return {a["key"]: a for a in rows}


CHROMIUM = Path("/usr/bin/chromium")  # deploy/install-system-packages.sh installs it
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


@contextlib.contextmanager
def headless_chromium(profile: Path, height: int = 1000):
    """A page in headless Debian chromium (playwright), closed afterwards."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "run deploy/install-system-packages.sh (Debian chromium)"
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": height})
        try:
            yield browser.new_page()
        finally:
            browser.close()


@contextlib.contextmanager
def prefect_client(settings):
    """A synchronous Prefect client inside `settings` (a `temporary_settings(...)` naming a
    test server): one client per block, the settings undone when it closes."""
    from prefect.client.orchestration import get_client

    with settings, get_client(sync_client=True) as client:
        yield client
