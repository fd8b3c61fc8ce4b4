"""The Prefect UI, in headless Debian chromium: an operator finds `ask` and reads its evidence."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from prefect.client.schemas.objects import StateType

from tests.flows.conftest import headless_chromium


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ui_shows_the_ask_deployment_and_the_evidence_of_its_run(prefect_server, ask_run,
                                                                 tmp_path: Path):
    from playwright.sync_api import expect

    assert ask_run.state.type == StateType.COMPLETED, ask_run.state.message
    with headless_chromium(tmp_path / "profile") as page:
        page.goto(f"{prefect_server.ui_url}/deployments")
        page.get_by_role("link", name="ask", exact=True).first.click()
        page.wait_for_url(re.compile(r"/deployments/deployment/"))
        page.get_by_role("link", name=ask_run.name).click()
        page.wait_for_url(re.compile(rf"/runs/flow-run/{ask_run.id}"))
        expect(page.get_by_text("Completed").first).to_be_visible()
        page.get_by_text("Artifacts", exact=True).click()
        page.get_by_text("ask-evidence").first.click()
        page.wait_for_url(re.compile(r"/artifacts/artifact/"))
        # the rendered markdown table of the evidence package, not an error page
        expect(page.get_by_role("cell", name="gaulois-1887-03-03")).to_be_visible()
        expect(page.get_by_role("heading", name=re.compile("débat sur les blés"))).to_be_visible()
        page.screenshot(path=str(tmp_path / "ask-evidence.png"), full_page=True)
