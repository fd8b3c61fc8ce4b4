"""The release gate through a real Prefect server and `mabillon serve`: a gated `release` run
pauses with the shadow report in its input form, and an approval, a rejection or nobody
deciding in time each end as they must — promoted, retired, or staged — with a release record."""
from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path

import pytest
import yaml
from prefect.client.schemas.objects import StateType

from tests.flows.conftest import OPERATOR_TOKEN, artifacts_of, form_shown, headless_chromium, prefect_client
from tests.flows.test_deployments import serving_generation
from tests.flows.test_ui import sign_in

pytestmark = pytest.mark.slow


def signed_in(server):
    """Prefect settings of a client of the test server (its API asks for the auth string)."""
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    return temporary_settings({PREFECT_API_URL: server.api_url, PREFECT_API_AUTH_STRING: server.auth_string})


def client_for(server):
    return prefect_client(signed_in(server))


def start_gated_release(server, records: list[dict], folder: Path, **options):
    """Trigger the `release` deployment on a fresh export, gate on, without waiting for it."""
    from prefect.deployments import run_deployment

    folder.mkdir(parents=True, exist_ok=True)
    export = folder / "export.jsonl"
    export.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    with signed_in(server):
        return run_deployment("release/release", timeout=0, parameters={
            "paths": [str(export)], "options": {"gate": True, "reason": "weekly intake", **options}})


def wait_for_state(server, run_id, accept, timeout_s: float = 600):
    deadline = time.monotonic() + timeout_s
    with client_for(server) as client:
        while time.monotonic() < deadline:
            run = client.read_flow_run(run_id)
            if run.state and accept(run.state):
                return run
            assert not (run.state and run.state.is_final()), f"run ended {run.state.type}: {run.state.message}"
            time.sleep(1)
    raise TimeoutError(f"run {run_id} not in the expected state within {timeout_s}s")


def paused(server, run_id):
    """The run, paused with its form shown (answered before the form is saved, it is refused)."""
    return wait_for_state(server, run_id, lambda s: s.is_paused()
                          and form_shown(server, run_id, s.state_details.run_input_keyset))


def finished(server, run_id, timeout_s: float = 600):
    deadline = time.monotonic() + timeout_s
    with client_for(server) as client:
        while time.monotonic() < deadline:
            run = client.read_flow_run(run_id)
            if run.state and run.state.is_final():
                return run
            time.sleep(1)
    raise TimeoutError(f"run {run_id} did not finish")


def the_form(server, run) -> tuple[str, dict]:
    keys = run.state.state_details.run_input_keyset
    with client_for(server) as client:
        return (json.loads(client.read_flow_run_input(run.id, keys["description"])),
                json.loads(client.read_flow_run_input(run.id, keys["schema"])))


def resume(server, run_id, answer: dict):
    with client_for(server) as client:
        return client.resume_flow_run(run_id, run_input=answer)


def records_of(home: Path, generation: str) -> list[dict]:
    return [yaml.safe_load(p.read_text("utf-8"))
            for p in sorted((home / "manifests" / "releases").glob(f"{generation}-*.yaml"))]


def routing_of(home: Path) -> dict:
    return json.loads((home / "manifests" / "routing.json").read_text("utf-8"))


def record(doc_id: str, text: str) -> dict:
    return {"doc_id": doc_id, "corpus": "le_temps", "date": "1887-03-06", "text": text}


def candidate_of(server, run) -> str:
    return the_form(server, run)[1]["properties"]["generation"]["default"]


# Each gated release gets a document no earlier one published. In a shuffled order, pytest sets this
# module fixture up again after another module's tests; counting its runs from 1 again reused a
# published document, and the release found nothing to gate and completed.
GATED_RECORDS = itertools.count(1)


@pytest.fixture(scope="module")
def paused_release(prefect_server, serving, served_home, tmp_path_factory):
    """`paused_release()`: (what served when it was built, the run) of a gated release paused
    for its reviewer, built on what serves now. The form tests read it, the approval test ends
    it: in file order the three share one run; a new one is started only when the last is no
    longer paused or something was published since it was built, so any order works. A run
    still paused at the end is rejected: no run waits on after the module."""
    runs = []

    def current():
        if runs:
            before, run = runs[-1]
            with client_for(prefect_server) as client:
                state = client.read_flow_run(run.id).state
            if state.is_paused() and serving_generation(served_home) == before:
                return before, run
        before = serving_generation(served_home)
        started = start_gated_release(prefect_server, [record(
            f"temps-1887-03-06-{next(GATED_RECORDS)}", "Le Temps. La Chambre discutera jeudi des droits sur les "
            "blés; M. Méline défendra le tarif devant les députés de la Brie.")], tmp_path_factory.mktemp("gate"))
        runs.append((before, paused(prefect_server, started.id)))
        return runs[-1]

    yield current
    for _, run in runs:
        with client_for(prefect_server) as client:
            if not client.read_flow_run(run.id).state.is_paused():
                continue
        resume(prefect_server, run.id, {"generation": candidate_of(prefect_server, run), "decision": "reject",
                                        "reason": "left paused by the form tests", "access_token": OPERATOR_TOKEN})
        assert finished(prefect_server, run.id, timeout_s=300).state.type == StateType.COMPLETED


def test_a_gated_release_pauses_with_the_shadow_report_in_its_form(prefect_server, served_home,
                                                                   paused_release):
    before, run = paused_release()
    description, schema = the_form(prefect_server, run)
    candidate = schema["properties"]["generation"]["default"]
    assert candidate != before and serving_generation(served_home) == before  # staged, not serving
    assert f"Release `{candidate}` waits for a decision" in description
    assert f"Candidate `{candidate}` (built on `{before}`) against serving `{before}`" in description
    assert "| lookup | 2 |" in description and "| press | 1 |" in description  # by question type
    assert "Latency, median" in description and "added 1" in description
    assert schema["properties"]["decision"]["enum"] == ["approve", "reject", "canary", "rebase"]
    assert set(schema["required"]) == {"decision", "reason"}
    assert artifacts_of(prefect_server, run.id)["release-gate"]["data"] == description
    # the wait holds no lock: the release lock file is free
    import fcntl

    with open(served_home / "manifests" / ".release.lock", "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


@pytest.mark.timeout(600)
def test_the_paused_run_shows_its_decision_form_in_the_ui(prefect_server, paused_release, tmp_path):
    from playwright.sync_api import expect

    _, run = paused_release()
    with headless_chromium(tmp_path / "profile", height=1100) as page:
        sign_in(page, prefect_server.ui_url)
        page.goto(f"{prefect_server.ui_url}/runs/flow-run/{run.id}")
        expect(page.get_by_text("Paused").first).to_be_visible(timeout=60_000)
        page.get_by_role("button", name=re.compile("^Resume")).first.click()
        dialog = page.get_by_role("dialog")
        expect(dialog.get_by_text(re.compile("waits for a decision"))).to_be_visible(timeout=30_000)
        expect(dialog.get_by_text("Shadow report")).to_be_visible()
        lookup = dialog.get_by_role("cell", name="lookup", exact=True)
        lookup.scroll_into_view_if_needed()
        expect(lookup).to_be_visible()  # the report's table, by question type, in the form
        expect(dialog.get_by_text(re.compile("Decision"))).to_be_visible()
        expect(dialog.get_by_text(re.compile("Reason"))).to_be_visible()
        page.screenshot(path=str(tmp_path / "gate-form.png"), full_page=True)


def test_an_approval_through_the_api_promotes_and_leaves_the_record(prefect_server, served_home,
                                                                    paused_release):
    before, run = paused_release()
    candidate = candidate_of(prefect_server, run)
    short = resume(prefect_server, run.id, {"generation": candidate, "decision": "approve", "reason": "ok"})
    assert short.status.value == "REJECT" and "too short" in str(short.details)  # the API checks the form
    assert serving_generation(served_home) == before
    done = resume(prefect_server, run.id, {"generation": candidate, "decision": "approve",
                                           "reason": "recall holds, one new article",
                                           "access_token": OPERATOR_TOKEN})
    assert done.status.value == "ACCEPT"
    final = finished(prefect_server, run.id)
    assert final.state.type == StateType.COMPLETED, final.state.message
    assert serving_generation(served_home) == candidate
    event = routing_of(served_home)["history"][-1]
    assert (event["action"], event["actor"], event["to_generation"], event["from_generation"]) == (
        "promote", "ops", candidate, before)  # the operator of the token (principals.json)
    assert event["flow_run_id"] == str(run.id)
    [rec] = records_of(served_home, candidate)
    assert rec["decision"]["action"] == "approve" and rec["decision"]["reason"] == "recall holds, one new article"
    assert rec["rollback_target"] == before and rec["shadow"]["n"] == 3
    assert rec["freshness"]["seconds"] > 0 and rec["freshness"]["newest_source"].endswith("export.jsonl#L1")
    artifacts = artifacts_of(prefect_server, run.id)
    assert "approve** by ops" in artifacts["release-record"]["data"]
    # the answer left the Prefect database once read (it may carry an access token)
    keys = final.state.state_details.run_input_keyset or run.state.state_details.run_input_keyset
    with client_for(prefect_server) as client:
        from prefect.exceptions import PrefectHTTPStatusError

        with pytest.raises(PrefectHTTPStatusError, match="404"):
            client.read_flow_run_input(run.id, keys["response"])


def test_a_rejection_retires_the_candidate(prefect_server, serving, served_home, tmp_path):
    before = serving_generation(served_home)
    run = start_gated_release(prefect_server, [record(
        "temps-1887-03-07", "Le Temps. Les sucres du Nord reviennent devant la commission.")], tmp_path)
    run = paused(prefect_server, run.id)
    candidate = candidate_of(prefect_server, run)
    wrong = resume(prefect_server, run.id, {"generation": before, "decision": "reject",
                                            "reason": "wrong run on purpose", "access_token": OPERATOR_TOKEN})
    assert wrong.status.value == "ACCEPT"  # the form is valid, the decision is not: asked again
    run = paused(prefect_server, run.id)
    assert "Refused: this release gates" in the_form(prefect_server, run)[0]
    assert serving_generation(served_home) == before and candidate not in routing_of(served_home)["retired"]
    resume(prefect_server, run.id, {"generation": candidate, "decision": "reject",
                                    "reason": "duplicates last week's export", "access_token": OPERATOR_TOKEN})
    final = finished(prefect_server, run.id)
    assert final.state.type == StateType.COMPLETED, final.state.message
    routing = routing_of(served_home)
    assert routing["serving"] == before and candidate in routing["retired"]
    assert routing["history"][-1]["action"] == "reject"
    assert records_of(served_home, candidate)[-1]["decision"]["action"] == "reject"


def test_nobody_deciding_in_time_leaves_it_staged_and_says_so(prefect_server, serving, served_home, tmp_path):
    before = serving_generation(served_home)
    run = start_gated_release(prefect_server, [record(
        "temps-1887-03-08", "Le Temps. Séance sans incident; la Chambre ajourne le budget.")], tmp_path,
        gate_timeout_s=15)
    run = paused(prefect_server, run.id)
    candidate = candidate_of(prefect_server, run)
    final = finished(prefect_server, run.id)
    assert final.state.type == StateType.FAILED  # not silent: the run says it was never resumed
    # The server fails an expired pause on its own schedule (FailExpiredPauses), which can come
    # before the flow's own timeout handler has written the routing event, the release record
    # and, last, the record's artifact: wait (bounded) for that artifact before reading them.
    deadline = time.monotonic() + 120
    while "timeout" not in (artifacts_of(prefect_server, run.id).get("release-record", {}).get("data") or "") \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    routing = routing_of(served_home)
    assert routing["serving"] == before and candidate not in routing["retired"]
    event = routing["history"][-1]
    assert (event["action"], event["to_generation"]) == ("gate-timeout", candidate)
    assert "stays staged" in event["reason"]
    assert (served_home / "manifests" / "generations" / f"{candidate}.yaml").exists()
    rec = records_of(served_home, candidate)[-1]
    assert rec["decision"]["action"] == "timeout" and rec["freshness"]["answerable_at"] is None
    assert "timeout" in artifacts_of(prefect_server, run.id)["release-record"]["data"]
