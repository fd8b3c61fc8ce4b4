"""The harvest as a Prefect flow and a scheduled deployment, and `mabillon ingest REF` end to end,
all against the loopback fake Gallica."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.harvest import HarvestRequest
from schemas.settings import MabillonSettings, ServeSettings
from tests.harvest.fake_gallica import FakeGallica

JDPL = "ark:/12148/bpt6ktest18210801"  # the smallest sample issue (4 pages, 1.5 MB of ALTO)
NIGHTLY = "0 2 * * *"
GAULOIS_1887 = {"ark": "ark:/12148/cb32779904b", "date_from": "1887-01-01", "date_to": "1887-12-31"}


def test_harvest_le_gaulois_1887_nightly_is_a_deployment_with_a_typed_form():
    from flows.serve import build_deployments

    deployments = {d.name: d for d in build_deployments(ServeSettings(harvest_cron=NIGHTLY, harvest=GAULOIS_1887))}
    harvest = deployments["harvest"]
    assert [s.schedule.cron for s in harvest.schedules] == [NIGHTLY]
    assert HarvestRequest(**harvest.parameters["params"]["request"]).describe() == \
        "title ark:/12148/cb32779904b, issues 1887-01-01 → 1887-12-31"
    form = harvest._parameter_openapi_schema
    assert "settings" not in form.properties and form.required == ["params"]
    assert {"HarvestParams", "HarvestRequest", "ReleaseOptions"} <= set(form.definitions)
    request = form.definitions["HarvestRequest"]["properties"]
    assert request["date_from"]["format"] == "date" and request["sru_query"]["type"] == "string"
    on_demand = {d.name: d for d in build_deployments(ServeSettings())}["harvest"]
    assert not on_demand.schedules and not on_demand.parameters  # without a cron: on demand, form filled by hand


def test_the_harvest_flow_fetches_into_the_home_and_leaves_an_artifact(tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.harvest import HarvestParams, harvest_flow

    with FakeGallica() as fake:
        settings = MabillonSettings(home=tmp_path, gallica={"base_url": fake.base_url, "min_interval_s": 0})
        state = harvest_flow(HarvestParams(request=HarvestRequest(ark=JDPL), release=False), settings,
                             return_state=True)
        outcome = state.result()
    assert [i.ark for i in outcome.report.issues] == [JDPL] and outcome.result is None
    assert (tmp_path / "harvest" / "packages" / "bpt6ktest18210801" / "manifest.xml").is_file()
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["harvest"])))
    assert run.name.startswith("harvest ark:/12148/bpt6ktest18210801")
    assert any(JDPL in (a.data or "") and a.flow_run_id == run.id for a in found)


@pytest.mark.slow
def test_ingest_of_an_issue_ark_harvests_then_publishes_and_again_changes_nothing(tmp_path, cli_prefect):
    with FakeGallica() as fake:
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]),
                   MABILLON_GALLICA__BASE_URL=fake.base_url, MABILLON_GALLICA__MIN_INTERVAL_S="0.2",
                   **cli_prefect.client_env())
        command = [sys.executable, "-m", "flows.cli", "ingest", JDPL, "--home", str(tmp_path), "--json"]
        first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert first.returncode == 0, first.stderr
        fetched = len(fake.log)
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert second.returncode == 0, second.stderr
    published, again = json.loads(first.stdout), json.loads(second.stdout)
    assert published["serving"] and published["generation"] == "g0001"
    assert published["harvest"][0]["issues"][0]["folder"].endswith("harvest/packages/bpt6ktest18210801")
    assert published["counts"]["sources"] >= 1 and published["counts"]["chunks"] > 0
    assert fetched == 8  # OAIRecord, Pagination, manifest, Toc (none: 404), 4 ALTO pages
    assert len(fake.log) == fetched  # the second ingest asked Gallica nothing
    assert again["harvest"][0]["from_cache"] == 8
    assert again["run"]["added"] == again["run"]["changed"] == 0  # the same package: nothing new
    assert again["generation"] == "g0001"
