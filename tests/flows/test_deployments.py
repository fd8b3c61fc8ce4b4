"""Deployments of `mabillon serve`, exercised through the API of a real Prefect server."""
from __future__ import annotations

import json
import os
import signal
import time
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml
from prefect.client.schemas.objects import StateType

from flows.drop_folder import ScheduledIngestParams, collect_inputs, read_uri_list
from flows.serve import build_deployments, reachable_definitions
from schemas.settings import PROJECT_ROOT, ServeSettings
from tests.flows.conftest import (INGEST_CRON, MABILLON, SERVED, artifacts_of, free_port, stop_group,
                                  wait_for_deployments)

NEW_RECORD = {"doc_id": "temps-1887-03-05", "corpus": "le_temps", "date": "1887-03-05",
              "text": "Le débat sur les blés viendra jeudi devant la Chambre. Les députés de la Brie "
                      "préparent des amendements sur les droits d'entrée."}


def test_uri_list_keeps_local_paths_and_s3_uris_and_records_what_it_skips(tmp_path: Path):
    (tmp_path / "a.jsonl").write_text("{}\n")
    listing = tmp_path / "uris.txt"
    listing.write_text("# exports of the week\n\na.jsonl\nfile:///data/b%20c.pdf\n"
                       "s3://bucket/d.pdf\nhttp://example.org/e.pdf\n", "utf-8")
    entries = read_uri_list(listing)
    assert entries.paths == [str(tmp_path / "a.jsonl"), "/data/b c.pdf", "s3://bucket/d.pdf"]
    assert entries.skipped == ["http://example.org/e.pdf: scheme http:// is not read by acquire "
                               "(local paths, file:// and s3:// URIs are)"]


def test_scheduled_ingest_takes_the_folder_and_the_list(tmp_path: Path):
    listing = tmp_path / "uris.txt"
    listing.write_text("/data/x.jsonl\n", "utf-8")
    inputs = collect_inputs(ScheduledIngestParams(drop_folder="/drop", uri_list=str(listing)))
    assert inputs.paths == ["/drop", "/data/x.jsonl"]


def test_forms_hide_settings_and_keep_every_model_they_reference():
    deployments = {d.name: d for d in build_deployments(ServeSettings(ingest_cron=INGEST_CRON))}
    assert set(deployments) == SERVED
    for d in deployments.values():
        schema = d._parameter_openapi_schema
        assert "settings" not in schema.properties
        assert "MabillonSettings" not in schema.definitions
        assert set(schema.definitions) == set(reachable_definitions(schema.properties,
                                                                    schema.definitions))
    ingest = deployments["scheduled-ingest"]._parameter_openapi_schema
    assert {"ScheduledIngestParams", "ReleaseOptions"} <= set(ingest.definitions)


def test_unreferenced_definitions_are_dropped():
    definitions = {"A": {"properties": {"b": {"$ref": "#/definitions/B"}}}, "B": {}, "C": {}}
    assert set(reachable_definitions({"p": {"$ref": "#/definitions/A"}}, definitions)) == {"A", "B"}


def test_compose_wires_server_postgres_minio_the_pool_and_its_workers():
    compose = yaml.safe_load((PROJECT_ROOT / "deploy" / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "prefect-server", "minio", "work-pool", "mabillon-register",
            "mabillon-worker"} <= set(services)
    server_env = services["prefect-server"]["environment"]
    db_env = services["postgres"]["environment"]
    url = server_env["PREFECT_SERVER_DATABASE_CONNECTION_URL"]
    assert url.startswith("postgresql+asyncpg://")
    assert f"{db_env['POSTGRES_USER']}:{db_env['POSTGRES_PASSWORD']}@postgres:5432/" \
           f"{db_env['POSTGRES_DB']}" in url
    pool, register, worker = (services[n] for n in ("work-pool", "mabillon-register", "mabillon-worker"))
    name = pool["command"][pool["command"].index("create") + 1]
    assert pool["command"][pool["command"].index("--type") + 1] == "process"
    # the deployments go to that pool, and the workers poll it
    assert register["command"][:2] == ["mabillon", "serve"]
    assert register["command"][register["command"].index("--work-pool") + 1] == name
    assert worker["command"][:3] == ["prefect", "worker", "start"]
    assert worker["command"][worker["command"].index("--pool") + 1] == name
    for job in (register, worker):
        assert job["depends_on"]["work-pool"]["condition"] == "service_completed_successfully"
        assert job["environment"]["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert worker["environment"]["AWS_ENDPOINT_URL"] == "http://minio:9000"
    assert worker["build"]["context"] == ".."  # compose paths are relative to deploy/
    assert (PROJECT_ROOT / worker["build"]["dockerfile"]).exists()
    for volume in (v.split(":", 1)[0] for s in services.values() for v in s.get("volumes", [])):
        assert volume.startswith((".", "/")) or volume in compose["volumes"]


def test_compose_worker_keeps_lancedb_and_the_source_store_in_minio(tmp_path: Path, monkeypatch):
    from schemas.settings import MabillonSettings
    from tasks.store.layout import StoreLayout

    compose = yaml.safe_load((PROJECT_ROOT / "deploy" / "docker-compose.yml").read_text())
    worker, register = compose["services"]["mabillon-worker"], compose["services"]["mabillon-register"]
    env = {k: str(v) for k, v in worker["environment"].items()}
    made = " ".join(compose["services"]["minio-buckets"]["command"])
    warehouse, drop = env["MABILLON_WAREHOUSE_DIR"], register["command"][register["command"].index("--drop-folder") + 1]
    for uri in (warehouse, drop):  # both buckets exist before the worker starts
        assert uri.startswith("s3://") and f"local/{uri.split('/')[2]}" in made
    assert worker["depends_on"]["minio-buckets"]["condition"] == "service_completed_successfully"
    # the settings the worker builds from that environment: warehouse on MinIO, manifests on the volume
    for key, value in {**env, "MABILLON_HOME": str(tmp_path)}.items():
        monkeypatch.setenv(key, value)
    layout = StoreLayout.from_settings(MabillonSettings())
    assert layout.lance.uri == f"{warehouse}/lance" and layout.blobs.uri.startswith(warehouse)
    assert layout.lance.options["aws_endpoint"] == "http://minio:9000"
    assert layout.lance.options["allow_http"] == "true"
    assert layout.manifests == tmp_path / "manifests"


@pytest.mark.slow
def test_every_deployment_is_registered_with_its_form_and_limits(prefect_server, serving,
                                                                 drop_folder):
    rows = httpx.post(f"{prefect_server.api_url}/deployments/filter", json={}, timeout=10).json()
    by_name = {d["name"]: d for d in rows}
    assert SERVED <= set(by_name)
    for row in by_name.values():
        assert "settings" not in row["parameter_openapi_schema"]["properties"]
    ask_form = by_name["ask"]["parameter_openapi_schema"]
    assert ask_form["required"] == ["params"]
    assert "question" in ask_form["definitions"]["AskParams"]["required"]
    ingest = by_name["scheduled-ingest"]
    assert [s["schedule"]["cron"] for s in ingest["schedules"]] == [INGEST_CRON]
    assert ingest["parameters"]["params"]["drop_folder"] == str(drop_folder)
    for name in ("scheduled-ingest", "promote", "rollback", "delete", "gc"):
        assert by_name[name]["global_concurrency_limit"]["limit"] == 1, name
    assert by_name["ask"]["global_concurrency_limit"] is None


@pytest.mark.slow
def test_ask_run_triggered_through_the_api_completes_with_its_evidence(prefect_server, ask_run):
    assert ask_run.state.type == StateType.COMPLETED, ask_run.state.message
    artifacts = artifacts_of(prefect_server.api_url, ask_run.id)
    evidence = artifacts["ask-evidence"]
    assert evidence["type"] == "markdown"
    assert "Generation `g0001`" in evidence["data"]
    # the sample records that speak of the postponed debate on wheat are cited
    assert "gaulois-1887-03-03" in evidence["data"]
    assert "intransigeant-1887-03-04" in evidence["data"]


def run_through_api(api_url: str, name: str, parameters: dict | None = None):
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api_url}):
        return run_deployment(name, parameters=parameters or {}, timeout=300)


def serving_generation(home: Path) -> str | None:
    from schemas.settings import MabillonSettings
    from tasks.store.layout import StoreLayout
    from tasks.store.routing import read_routing

    return read_routing(StoreLayout.from_settings(MabillonSettings(home=home))).serving


@pytest.fixture(scope="module")
def scheduled_ingest_run(prefect_server, serving, drop_folder):
    """A new export lands in the drop folder; the scheduled-ingest deployment is run on demand."""
    (drop_folder / "week-10.jsonl").write_text(json.dumps(NEW_RECORD, ensure_ascii=False) + "\n",
                                               "utf-8")
    return run_through_api(prefect_server.api_url, "scheduled-ingest/scheduled-ingest")


@pytest.mark.slow
def test_scheduled_ingest_run_publishes_what_lands_in_the_drop_folder(prefect_server, served_home,
                                                                      scheduled_ingest_run):
    run = scheduled_ingest_run
    assert run.state.type == StateType.COMPLETED, run.state.message
    summary = artifacts_of(prefect_server.api_url, run.id)["scheduled-ingest"]["data"]
    assert "generation `g0002`: published and serving" in summary
    assert "added 1, changed 0, unchanged 0" in summary
    assert serving_generation(served_home) == "g0002"


@pytest.mark.slow
def test_rollback_deployment_returns_to_the_previous_generation(prefect_server, served_home,
                                                                 scheduled_ingest_run):
    assert serving_generation(served_home) == "g0002"
    run = run_through_api(prefect_server.api_url, "rollback/rollback",
                          {"params": {"reason": "bad export"}})
    assert run.state.type == StateType.COMPLETED, run.state.message
    assert serving_generation(served_home) == "g0001"
    assert "Serving: g0001" in artifacts_of(prefect_server.api_url, run.id)["routing"]["data"]


@pytest.mark.slow
def test_serve_without_an_api_url_starts_its_own_server_and_stops_it(tmp_path: Path, served_home):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:  # a file, not an unread pipe that could fill and block it
        room_port = free_port()
        serve = subprocess.Popen([str(MABILLON), "serve", "--home", str(served_home), "--port", str(port),
                                  "--reading-room-port", str(room_port)],
                                 env=env, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        api_url = f"http://127.0.0.1:{port}/api"
        wait_for_deployments(api_url, SERVED, serve, timeout_s=180)
        # the UI is told to call this server's API, not the default localhost:4200
        assert httpx.get(f"http://127.0.0.1:{port}/ui-settings", timeout=10).json()["api_url"] == api_url
        serve.send_signal(signal.SIGTERM)
        stopping = time.monotonic()
        try:
            assert serve.wait(120) == 0
        except subprocess.TimeoutExpired:
            pytest.fail(f"serve still running 120 s after SIGTERM:\n{log_path.read_text(errors='replace')[-3000:]}")
        print(f"serve stopped {time.monotonic() - stopping:.1f} s after SIGTERM")
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{api_url}/health", timeout=2)
        with pytest.raises(httpx.TransportError):  # the reading room it started stopped with it
            httpx.get(f"http://127.0.0.1:{room_port}/healthz", timeout=2)
    finally:
        stop_group(serve)
