"""Deployments of `mabillon serve`, exercised through the API of a real Prefect server."""
from __future__ import annotations

import json
import re
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
from tests.flows.conftest import (INGEST_CRON, MABILLON, OPERATOR_TOKEN, SERVED, TENANT_B_TOKEN, api,
                                  artifacts_of,
                                  free_port, run_through_api, served_env, stop_group, wait_for_deployments)

NEW_RECORD = {"doc_id": "temps-1887-03-05", "corpus": "le_temps", "date": "1887-03-05",
              "text": "Le débat sur les blés viendra jeudi devant la Chambre. Les députés de la Brie "
                      "préparent des amendements sur les droits d'entrée."}


def test_uri_list_keeps_local_paths_and_s3_uris_and_names_every_line_it_skips(tmp_path: Path):
    (tmp_path / "a.jsonl").write_text("{}\n")
    (tmp_path / "b c.pdf").write_bytes(b"%PDF-1.4")
    listing = tmp_path / "uris.txt"
    listing.write_text("# exports of the week\n\na.jsonl\n"
                       f"file://{tmp_path}/b%20c.pdf\ns3://bucket/d.pdf\nhttp://example.org/e.pdf\n"
                       "oups\ns3:///no-bucket.pdf\n", "utf-8")
    entries = read_uri_list(listing)
    assert entries.paths == [str(tmp_path / "a.jsonl"), str(tmp_path / "b c.pdf"), "s3://bucket/d.pdf"]
    assert entries.skipped == [
        "line 6 'http://example.org/e.pdf': scheme http:// is not read by acquire "
        "(local paths, file:// and s3:// URIs are)",
        "line 7 'oups': no such file or folder",  # a stray word is named, never a crash
        "line 8 's3:///no-bucket.pdf': an s3:// URI needs a bucket"]


def test_a_uri_list_that_does_not_exist_is_one_skipped_entry(tmp_path: Path):
    inputs = collect_inputs(ScheduledIngestParams(uri_list=str(tmp_path / "missing.txt")))
    assert inputs.paths == [] and inputs.skipped == [f"{tmp_path / 'missing.txt'}: the URI list does not exist"]


def test_scheduled_ingest_takes_the_folder_and_the_list(tmp_path: Path):
    (tmp_path / "x.jsonl").write_text("{}\n")
    listing = tmp_path / "uris.txt"
    listing.write_text(f"{tmp_path}/x.jsonl\n", "utf-8")
    inputs = collect_inputs(ScheduledIngestParams(drop_folder="/drop", uri_list=str(listing)))
    assert inputs.paths == ["/drop", str(tmp_path / "x.jsonl")]


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
    # the API asks for Prefect's basic-auth string, and every client container sends the same one
    assert server_env["PREFECT_SERVER_API_AUTH_STRING"].startswith("${MABILLON_PREFECT_AUTH:?")
    for job in (pool, register, worker):
        assert job["environment"]["PREFECT_API_AUTH_STRING"] == server_env["PREFECT_SERVER_API_AUTH_STRING"]
        assert job["environment"]["PREFECT_LOGGING_HANDLERS_API_CLASS"] == "flows.run_logging.RedactedAPILogHandler"
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
        if value.startswith("${"):  # compose's own substitution, not a value
            continue
        monkeypatch.setenv(key, value)
    layout = StoreLayout.from_settings(MabillonSettings())
    assert layout.lance.uri == f"{warehouse}/lance" and layout.blobs.uri.startswith(warehouse)
    assert layout.lance.options["aws_endpoint"] == "http://minio:9000"
    assert layout.lance.options["allow_http"] == "true"
    assert layout.manifests == tmp_path / "manifests"


@pytest.mark.slow
def test_every_deployment_is_registered_with_its_form_description_and_limits(prefect_server, serving,
                                                                             served_home, served_bucket,
                                                                             drop_folder):
    # the generations the form offers are the home's, newest first, as they are now: other tests
    # publish into the served home too, and the forms follow within a refresh (3 s)
    deadline = time.monotonic() + 60
    while True:
        offered = servable_generations(served_home, served_bucket)
        with api(prefect_server) as client:
            rows = client.post("/deployments/filter", json={}).json()
        by_name = {d["name"]: d for d in rows}
        enum = by_name["ask"]["parameter_openapi_schema"]["definitions"]["AskParams"]["properties"][
            "generation"]["enum"]
        if enum == ["serving", *offered] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert SERVED <= set(by_name)
    for row in by_name.values():
        assert "settings" not in row["parameter_openapi_schema"]["properties"]
        assert row["description"] and row["description"].startswith("For ")
    ask_form = by_name["ask"]["parameter_openapi_schema"]
    assert ask_form["required"] == ["params"]
    ask_params = ask_form["definitions"]["AskParams"]
    assert list(ask_params["properties"])[0] == "question" and "question" in ask_params["required"]
    assert "principal" not in ask_params["properties"]  # never a typed name in a form
    assert ask_params["properties"]["access_token"]["format"] == "password"
    # the two the served home published first are there whatever was published since
    assert enum == ["serving", *offered] and {"g0002", "g0001"} <= set(offered), (enum, offered)
    assert offered == sorted(offered, reverse=True)
    ingest = by_name["scheduled-ingest"]
    assert [s["schedule"]["cron"] for s in ingest["schedules"]] == [INGEST_CRON]
    assert ingest["parameters"]["params"]["drop_folder"] == str(drop_folder)
    for name in ("promote", "rollback", "canary", "delete", "gc"):
        assert by_name[name]["global_concurrency_limit"]["limit"] == 1, name
    for name in ("scheduled-ingest", "release"):  # may pause for a person: no lease to keep (flows/serve.py)
        assert by_name[name]["global_concurrency_limit"] is None, name
    for name, model in (("promote", "PromoteParams"), ("rollback", "RollbackParams"),
                        ("canary", "CanaryParams"), ("delete", "DeleteParams"), ("gc", "GcParams")):
        form = by_name[name]["parameter_openapi_schema"]["definitions"][model]
        assert {"operator", "operator_token"} <= set(form["required"]), name
    assert by_name["ask"]["global_concurrency_limit"] is None


@pytest.mark.slow
def test_the_api_refuses_a_client_without_the_auth_string(prefect_server, serving):
    assert httpx.post(f"{prefect_server.api_url}/deployments/filter", json={}, timeout=10).status_code == 401
    with api(prefect_server) as client:
        assert client.post("/deployments/filter", json={}).status_code == 200


@pytest.mark.slow
def test_ask_run_triggered_through_the_api_completes_with_readable_evidence(prefect_server, ask_run):
    assert ask_run.state.type == StateType.COMPLETED, ask_run.state.message
    assert ask_run.name.startswith("ask: Quand le débat sur les blés")
    artifacts = artifacts_of(prefect_server, ask_run.id)
    evidence = artifacts["ask-evidence"]["data"]
    # whichever generation serves the shared home by then (other modules release into it too)
    assert re.search(r"from generation `g\d{4}`", evidence), evidence[:300]
    # the sample records that speak of the postponed debate on wheat are cited, with passages
    assert "gaulois-1887-03-03" in evidence and "intransigeant-1887-03-04" in evidence
    # serve runs the reading room, so each cited document links to its evidence page there
    assert "**blés**" in evidence and "[evidence in the reading room](" in evidence
    assert "ask-lineage" in artifacts and "sha256" in artifacts["ask-lineage"]["data"]
    assert "/tmp" not in evidence and "/tmp" not in artifacts["ask-lineage"]["data"]


def serving_generation(home: Path) -> str | None:
    from schemas.settings import MabillonSettings
    from tasks.store.layout import StoreLayout
    from tasks.store.routing import read_routing

    return read_routing(StoreLayout.from_settings(MabillonSettings(home=home))).serving


def routing_of(home: Path):
    from schemas.settings import MabillonSettings
    from tasks.store.layout import StoreLayout
    from tasks.store.routing import read_routing

    return read_routing(StoreLayout.from_settings(MabillonSettings(home=home)))


def servable_generations(home: Path, bucket) -> list[str]:
    """The home's generations whose data is kept (in its warehouse, on `bucket`), newest first:
    what a form may offer."""
    from schemas.settings import MabillonSettings
    from tasks.ops.generations import generation_statuses
    from tasks.store.layout import StoreLayout

    settings = MabillonSettings(home=home, warehouse_dir=bucket.uri("warehouse"), storage=bucket.storage)
    statuses = generation_statuses(StoreLayout.from_settings(settings))
    return [s.generation for s in reversed(statuses) if s.data_kept]


def all_generations(home: Path) -> list[str]:
    return sorted((p.stem for p in (home / "manifests" / "generations").glob("g*.yaml")), reverse=True)


@pytest.fixture(scope="module")
def scheduled_ingest_run(prefect_server, serving, served_home, drop_folder):
    """A new export lands in the drop folder; the scheduled-ingest deployment is run on demand.
    Yields the run with the home's generations and what served just before it and just after."""
    (drop_folder / "week-10.jsonl").write_text(json.dumps(NEW_RECORD, ensure_ascii=False) + "\n",
                                               "utf-8")
    landed = time.time() - 60  # finished writing a minute ago: past the drop folder's settle time
    os.utime(drop_folder / "week-10.jsonl", (landed, landed))
    before = all_generations(served_home), serving_generation(served_home)
    run = run_through_api(prefect_server, "scheduled-ingest/scheduled-ingest")
    return run, before, serving_generation(served_home)


@pytest.mark.slow
def test_scheduled_ingest_run_publishes_what_lands_in_the_drop_folder(prefect_server, served_home,
                                                                      scheduled_ingest_run):
    run, (generations, serving_before), serving_after = scheduled_ingest_run
    assert run.state.type == StateType.COMPLETED, run.state.message
    new = f"g{int(generations[0][1:]) + 1:04d}"  # the next number after every generation so far
    artifacts = artifacts_of(prefect_server, run.id)
    summary = artifacts["scheduled-ingest"]["data"]
    assert f"generation `{new}`: published and serving" in summary
    assert "added 1, changed 0, unchanged 0" in summary
    assert serving_after == new
    # every release shows the generations and what changed
    table = {r["generation"]: r["status"] for r in json.loads(artifacts["generations"]["data"])}
    assert list(table) == [new, *generations]
    assert table[new] == "serving" and table[serving_before] == "retired (kept: can be promoted again)"
    diff = artifacts["last-diff"]["data"]
    assert f"{serving_before} → {new}" in diff and f"  + {NEW_RECORD['doc_id']}" in diff


@pytest.mark.slow
def test_operator_deployments_refuse_a_run_without_an_operator_token(prefect_server, served_home, serving):
    before = serving_generation(served_home)
    # the form requires the token: without one the API does not even create the run
    with pytest.raises(Exception, match="operator_token"):
        run_through_api(prefect_server, "rollback/rollback",
                        {"params": {"reason": "no token", "operator": "Mallory"}})
    for params in ({"reason": "wrong token", "operator": "Mallory", "operator_token": "guess"},
                   {"reason": "a reader's token", "operator": "Mallory", "operator_token": TENANT_B_TOKEN}):
        run = run_through_api(prefect_server, "rollback/rollback", {"params": params})
        assert run.state.type == StateType.FAILED
        failure = artifacts_of(prefect_server, run.id)["failure"]["data"]
        assert "operator's access token" in failure and "/tmp" not in failure
        assert "serves" not in failure  # no data in a refusal
    assert serving_generation(served_home) == before


@pytest.mark.slow
def test_rollback_deployment_records_the_operator_and_shows_what_serves(prefect_server, served_home, serving,
                                                                        served_bucket):
    from tasks.ops.switching import previously_serving

    # whatever serves goes back to what served before it (the served home published two at least)
    routing = routing_of(served_home)
    before, target = routing.serving, previously_serving(routing)
    assert target not in (None, before), routing
    try:
        run = run_through_api(prefect_server, "rollback/rollback", {"params": {
            "reason": "bad export", "operator": "Marie Curie", "operator_token": OPERATOR_TOKEN}})
        assert run.state.type == StateType.COMPLETED, run.state.message
        assert run.name == "rollback by Marie Curie"
        assert serving_generation(served_home) == target
        event = routing_of(served_home).history[-1]
        assert (event.actor, event.from_generation, event.to_generation) == ("Marie Curie [ops]", before, target)
        artifacts = artifacts_of(prefect_server, run.id)
        assert f"Serving: {target}" in artifacts["routing"]["data"]
        table = {r["generation"]: r["status"] for r in json.loads(artifacts["generations"]["data"])}
        assert table[target].startswith("serving") and not table[before].startswith("serving")
    finally:
        # the served home is the session's: what served serves again for the tests after this one
        # (shuffled, seed 12071, the rollback right after the home was built put g0001 back, which
        # holds no tenant-B document, and the tenant-B token test found nothing)
        if serving_generation(served_home) != before:
            back = subprocess.run([str(MABILLON), "promote", before, "--reason", "put back after the rollback test",
                                   "--home", str(served_home), "--json"], env=served_env(prefect_server, served_bucket),
                                  capture_output=True, text=True, timeout=300)
            assert back.returncode == 0 and serving_generation(served_home) == before, back.stderr[-2000:]
    # the token is not kept in the run's stored parameters
    with api(prefect_server) as client:
        stored = client.get(f"/flow_runs/{run.id}").json()["parameters"]["params"]
    assert stored["operator_token"] == "**********" and stored["operator"] == "Marie Curie"


@pytest.mark.slow
def test_serve_without_an_api_url_starts_its_own_server_and_stops_it(tmp_path: Path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_API_AUTH_STRING")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    env["MABILLON_SERVE__AUTH_STRING"] = "keeper:own-server-secret"
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:  # a file, not an unread pipe that could fill and block it
        # another home: this serve's state file must not replace the shared serve's
        room_port = free_port()
        serve = subprocess.Popen([str(MABILLON), "serve", "--home", str(tmp_path / "other-home"),
                                  "--port", str(port), "--reading-room-port", str(room_port)],
                                 env=env, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        api_url = f"http://127.0.0.1:{port}/api"
        wait_for_deployments(api_url, SERVED, serve, timeout_s=180, auth_string="keeper:own-server-secret")
        assert httpx.get(f"{api_url}/deployments/filter", timeout=10).status_code in (401, 405)
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
