"""A gated release started through the `release` deployment (as from the UI) waits for its person
however long it takes, and a decision on it never takes out of service what another release
published meanwhile; the operator forms follow every routing change.

The deployments are served as `mabillon serve` builds them (tests/flows/gate_serve.py) against the
session's Prefect server, with Prefect's deployment lease renewed every 1.5 s instead of every
225 s (tests/flows/short_lease/sitecustomize.py): a run that held a deployment concurrency lease
across its pause would crash within one renewal, as it did after ~3.6 minutes in the UI.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from prefect.client.schemas.objects import StateType

from schemas.settings import PROJECT_ROOT, MabillonSettings
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records
from tests.flows.conftest import form_shown, free_port, prefect_client, stop_group

pytestmark = pytest.mark.slow

NAME = "gate-waits"  # the deployments' name here: nothing else on the session's server uses it
RENEWAL_FRACTION = 0.005  # of Prefect's 300-s lease: a renewal every 1.5 s
RENEWAL_S = 300 * RENEWAL_FRACTION
PERIODS = 10  # renewal periods a paused run must outlive before it is answered
CANDIDATE_RECORD = {"doc_id": "temps-1887-03-05", "corpus": "le_temps", "date": "1887-03-05",
                    "text": "Le Temps. Le débat sur les blés viendra jeudi; les députés de la Brie "
                            "préparent des amendements sur les droits d'entrée."}
URGENT_RECORD = {"doc_id": "figaro-1887-03-06", "corpus": "le_figaro", "date": "1887-03-06",
                 "text": "Le Figaro. Les fabricants de sucre du Nord réclament une enquête; le ministre "
                         "promet une réponse avant la fin du mois."}


@pytest.fixture(scope="module")
def gate_home(tmp_path_factory) -> Path:
    """g0001 (the sample records) serving."""
    from flows.release import release

    root = tmp_path_factory.mktemp("gate-waits")
    home = root / "home"
    release(paths=[str(write_records(root / "sample.jsonl", SAMPLE_RECORDS))], settings=settings_for(home))
    return home


@pytest.fixture(scope="module")
def served(cli_prefect, gate_home):
    """The release and rollback deployments served for `gate_home`; yields the serve log."""
    log_path = gate_home.parent / "serve.log"
    env = {**os.environ, **cli_prefect.client_env(), "MABILLON_HOME": str(gate_home),
           "MABILLON_GATE__POLL_S": "1", "MABILLON_TEST_LEASE_RENEWAL_FRACTION": str(RENEWAL_FRACTION),
           "PREFECT_RUNNER_POLL_FREQUENCY": "1",  # runs start within a second of being asked for
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).with_name("short_lease")), str(PROJECT_ROOT),
                                          *filter(None, [os.environ.get("PYTHONPATH")])])}
    with log_path.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "tests.flows.gate_serve", cli_prefect.api_url, NAME],
                                   cwd=gate_home.parent, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not _deployment(cli_prefect, "release"):
            assert process.poll() is None, log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the deployments were not registered within 180 s"
            time.sleep(0.5)
        yield log_path
    finally:
        stop_group(process)


def _client(server):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    return prefect_client(temporary_settings({PREFECT_API_URL: server.api_url}))


def _deployment(server, flow_name: str):
    from prefect.exceptions import ObjectNotFound

    with _client(server) as client:
        try:
            return client.read_deployment_by_name(f"{flow_name}/{NAME}")
        except ObjectNotFound:
            return None


def _run_release(server, records: list[dict], folder: Path, wait_s: float, **options):
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    folder.mkdir(parents=True, exist_ok=True)
    with temporary_settings({PREFECT_API_URL: server.api_url}):
        return run_deployment(f"release/{NAME}", timeout=wait_s, parameters={
            "paths": [str(write_records(folder / "export.jsonl", records))], "options": options})


def _wait(server, run_id, accept, what: str, timeout_s: float = 300):
    deadline = time.monotonic() + timeout_s
    with _client(server) as client:
        while time.monotonic() < deadline:
            run = client.read_flow_run(run_id)
            if run.state and accept(run):
                return run
            assert not (run.state and run.state.is_final()), \
                f"the run ended {run.state.type} while {what} was expected: {run.state.message}"
            time.sleep(0.5)
    raise TimeoutError(f"run {run_id}: not {what} within {timeout_s:.0f} s")


def _form(server, run) -> tuple[str, str]:
    """(the form's description, the candidate it names) of a paused run."""
    keys = run.state.state_details.run_input_keyset
    with _client(server) as client:
        description = json.loads(client.read_flow_run_input(run.id, keys["description"]))
        schema = json.loads(client.read_flow_run_input(run.id, keys["schema"]))
    return description, schema["properties"]["generation"]["default"]


def _shown(server):
    """A run paused with its form shown (an answer sent before the form is saved is refused)."""
    return lambda r: r.state.is_paused() and form_shown(server, r.id, r.state.state_details.run_input_keyset)


def _paused_again(server, run_id, after_key: str):
    """Paused on a new question (the pause key of each question differs), its form shown."""
    shown = _shown(server)
    return _wait(server, run_id, lambda r: shown(r) and r.state.state_details.pause_key != after_key,
                 "paused on a new question")


def _answer(server, run, **answer) -> None:
    with _client(server) as client:
        result = client.resume_flow_run(run.id, run_input={"operator": "ana", **answer})
    assert result.status.value == "ACCEPT", result.details


def _routing(home: Path):
    from tasks.store.layout import StoreLayout
    from tasks.store.routing import read_routing

    return read_routing(StoreLayout.from_settings(MabillonSettings(home=home)))


def _documents(home: Path, generation: str) -> set[str]:
    from tasks.store.documents import document_ids
    from tasks.store.layout import StoreLayout

    return set(document_ids(StoreLayout.from_settings(MabillonSettings(home=home)), generation))


def _records(home: Path, generation: str) -> list[dict]:
    return [yaml.safe_load(p.read_text("utf-8"))
            for p in sorted((home / "manifests" / "releases").glob(f"{generation}-*.yaml"))]


def _forms_show(server, serving: str, timeout_s: float = 60) -> dict:
    """The rollback form once it says `serving` serves (the refresher ticks every 3 s)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        d = _deployment(server, "rollback")
        if d.description and f"Now {serving} serves" in d.description:
            return d.parameter_openapi_schema["definitions"]["RollbackParams"]["properties"]["to"]
        time.sleep(0.5)
    raise AssertionError(f"the rollback form still says {d.description!r}, not that {serving} serves")


def test_a_gated_release_from_the_deployment_outlives_many_lease_periods_and_a_stale_approval_loses_nothing(
        cli_prefect, gate_home, served, tmp_path):
    assert _deployment(cli_prefect, "release").global_concurrency_limit is None  # no lease to keep
    started = _run_release(cli_prefect, [CANDIDATE_RECORD], tmp_path / "candidate", 0, gate=True,
                           reason="weekly intake")
    run = _wait(cli_prefect, started.id, _shown(cli_prefect), "paused")
    paused_at = time.monotonic()
    description, candidate = _form(cli_prefect, run)
    assert candidate == "g0002" and "(built on `g0001`)" in description and "rebase" in description

    # meanwhile an ungated release of the same deployment publishes another document, and serves
    urgent = _run_release(cli_prefect, [URGENT_RECORD], tmp_path / "urgent", 300, gate=False,
                          reason="urgent correction")
    assert urgent.state.type == StateType.COMPLETED, urgent.state.message
    assert _routing(gate_home).serving == "g0003"
    to = _forms_show(cli_prefect, "g0003")  # the forms follow the routing change
    assert "g0003" not in to["enum"] and "g0001" in to["enum"] and to["description"].startswith("now g0003 serves")

    # the paused run outlives many renewal periods of a deployment lease, still paused
    while time.monotonic() - paused_at < PERIODS * RENEWAL_S:
        _wait(cli_prefect, run.id, lambda r: r.state.is_paused(), "still paused", timeout_s=5)
        time.sleep(RENEWAL_S / 2)
    key = _wait(cli_prefect, run.id, lambda r: r.state.is_paused(), "still paused").state.state_details.pause_key

    # approving the candidate built on g0001 would serve it without g0003's document: refused, in words
    _answer(cli_prefect, run, generation=candidate, decision="approve", reason="recall holds")
    run = _paused_again(cli_prefect, run.id, key)
    description, _ = _form(cli_prefect, run)
    assert ("Refused: g0003 was published since g0002 was built on g0001: what it brought is not in "
            "g0002; approving it would take that out of service. Decide rebase") in description
    assert _routing(gate_home).serving == "g0003"

    # rebase: the run builds the release again on g0003 and asks about the rebased candidate
    _answer(cli_prefect, run, generation=candidate, decision="rebase", reason="keep the correction")
    run = _paused_again(cli_prefect, run.id, run.state.state_details.pause_key)
    description, rebased = _form(cli_prefect, run)
    assert rebased == "g0004" and "(built on `g0003`)" in description
    routing = _routing(gate_home)
    assert routing.serving == "g0003" and "g0002" in routing.retired
    assert routing.history[-1].action == "rebase"

    _answer(cli_prefect, run, generation=rebased, decision="approve", reason="recall holds, nothing lost")
    done = _wait(cli_prefect, run.id, lambda r: r.state.is_final(), "finished")
    assert done.state.type == StateType.COMPLETED, done.state.message
    assert _routing(gate_home).serving == "g0004"
    # nothing published since is lost: the sample, the urgent correction and the candidate's record
    assert _documents(gate_home, "g0004") == {r["doc_id"] for r in [*SAMPLE_RECORDS, URGENT_RECORD,
                                                                     CANDIDATE_RECORD]}
    [superseded] = _records(gate_home, "g0002")
    assert superseded["decision"]["action"] == "rebase" and superseded["published_since"] == ["g0003"]
    assert superseded["refused"][0].startswith("approve: g0003 was published since g0002")
    [approved] = _records(gate_home, "g0004")
    assert approved["decision"]["action"] == "approve" and approved["parent"] == "g0003"
    assert approved["published_since"] == [] and approved["serving_before"] == "g0003"
    _forms_show(cli_prefect, "g0004")
    # every refresh worked at its first try: no error logged, let alone once per tick
    assert "not refreshed" not in served.read_text(errors="replace")


def test_a_refresh_that_fails_is_logged_once_not_at_every_tick(tmp_path, caplog):
    from prefect.settings import PREFECT_API_URL, PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    from flows.serve import FormRefresher, build_deployments

    settings = settings_for(tmp_path / "home")
    refresher = FormRefresher(build_deployments(settings), settings)
    routing = tmp_path / "home" / "manifests" / "routing.json"
    routing.parent.mkdir(parents=True)
    routing.write_text("{}", "utf-8")  # a routing change: the forms are due a refresh
    # a server that answers nothing (stopping, or not started yet)
    with caplog.at_level(logging.INFO, logger="flows.serve"), temporary_settings(
            {PREFECT_API_URL: f"http://127.0.0.1:{free_port()}/api", PREFECT_CLIENT_MAX_RETRIES: 0}):
        assert [refresher.tick() for _ in range(3)] == [False] * 3  # tried at every tick
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("deployment forms not refreshed"), warnings
    assert refresher.failure  # still due: the next tick tries again
