"""`mabillon serve` starts the reading room beside the deployments; the `ask` run's evidence
artifact links each document to its evidence page there, and the links open (warehouse on S3)."""
from __future__ import annotations

import re

import httpx
import pytest
from prefect.client.schemas.objects import StateType

from tests.flows.conftest import READING_ROOM_PORT, artifacts_of


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_ask_artifact_links_to_evidence_pages_that_open(prefect_server, ask_run):
    assert ask_run.state.type == StateType.COMPLETED, ask_run.state.message
    markdown = artifacts_of(prefect_server, ask_run.id)["ask-evidence"]["data"]
    base = f"http://127.0.0.1:{READING_ROOM_PORT}"
    links = re.findall(rf"\]\(({re.escape(base)}/queries/[^)#\s]+)(#doc-\d+)?\)", markdown)
    assert links, markdown[-1500:]
    evidence_url, _ = links[0]
    page = httpx.get(evidence_url, timeout=30)
    assert page.status_code == 200
    assert "gaulois-1887-03-03" in page.text and "débat sur les blés" in page.text
    query_id = evidence_url.rsplit("/", 1)[1]
    # the answer cites text records, which have no page to paint: no manifest is linked, and the
    # address answers 404 in words rather than a manifest without canvases
    assert "/manifest" not in markdown
    manifest = httpx.get(f"{base}/iiif/query/{query_id}/manifest", timeout=30)
    assert manifest.status_code == 404 and "page image" in manifest.text
    # a viewer with a token nobody holds is refused, not shown the default principal's page
    assert httpx.get(evidence_url, headers={"Authorization": "Bearer nobody"}, timeout=30).status_code == 401
