"""Who is asking, in the Prefect UI (issue 12): a run's principal comes from an access token typed
into the form, never from a name. Tested through the API of the served deployments."""
from __future__ import annotations

import pytest
from prefect.client.schemas.objects import StateType

from tests.flows.conftest import (ASK_QUESTION, TENANT_B_MARKER, TENANT_B_RECORD, TENANT_B_TOKEN, api,
                                  artifacts_of, run_through_api)

pytestmark = pytest.mark.slow
TENANT_B_DOC = TENANT_B_RECORD["doc_id"]


def ask(prefect_server, **params):
    return run_through_api(prefect_server, "ask/ask", {"params": {"question": ASK_QUESTION, **params}})


def run_logs(prefect_server, run_id) -> str:
    with api(prefect_server) as client:
        rows = client.post("/logs/filter", json={"logs": {"flow_run_id": {"any_": [str(run_id)]}}}).json()
    return "\n".join(r["message"] for r in rows)


def stored_parameters(prefect_server, run_id) -> dict:
    with api(prefect_server) as client:
        return client.get(f"/flow_runs/{run_id}").json()["parameters"]["params"]


def test_naming_another_tenant_without_its_token_sees_only_public_material(prefect_server, serving):
    named = ask(prefect_server, principal="bea")  # bea is tenant B's reader
    unnamed = ask(prefect_server, principal="nobody-at-all")
    for run in (named, unnamed):
        assert run.state.type == StateType.COMPLETED, run.state.message
        evidence = artifacts_of(prefect_server, run.id)["ask-evidence"]["data"]
        assert TENANT_B_DOC not in evidence and TENANT_B_MARKER not in evidence
        assert "gaulois-1887-03-03" in evidence  # the public answer is there
    # a name that exists and one that does not give the same answer: the name confirms nothing
    ids = [artifacts_of(prefect_server, r.id)["ask-evidence"]["data"].split("## Ranks and ids")[1]
           for r in (named, unnamed)]
    assert ids[0] == ids[1]


def test_tenant_b_token_opens_tenant_b_and_is_masked_in_the_stored_parameters(prefect_server, serving):
    run = ask(prefect_server, access_token=TENANT_B_TOKEN)
    assert run.state.type == StateType.COMPLETED, run.state.message
    evidence = artifacts_of(prefect_server, run.id)["ask-evidence"]["data"]
    assert TENANT_B_DOC in evidence
    stored = stored_parameters(prefect_server, run.id)
    assert stored["access_token"] == "**********" and stored["question"] == ASK_QUESTION
    assert TENANT_B_TOKEN not in run_logs(prefect_server, run.id)
    assert TENANT_B_TOKEN not in run.name


def test_a_wrong_token_fails_the_run_with_words_and_no_data(prefect_server, serving):
    run = ask(prefect_server, access_token="not-a-real-token")
    assert run.state.type == StateType.FAILED
    artifacts = artifacts_of(prefect_server, run.id)
    assert "ask-evidence" not in artifacts and "ask-lineage" not in artifacts
    failure = artifacts["failure"]["data"]
    assert "Access refused: invalid access token" in failure
    shown = "\n".join([failure, run.state.message or "", run_logs(prefect_server, run.id)])
    for leak in ("/tmp", "principals.json", "Traceback", "tenant-b", TENANT_B_MARKER):
        assert leak not in shown, leak
    assert stored_parameters(prefect_server, run.id)["access_token"] == "**********"
