"""The Prefect UI in headless Debian chromium, as a researcher uses it: sign in, open the `ask`
deployment, find the question as the form's first field, submit, and read the evidence."""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.flows.conftest import AUTH_STRING, api, artifacts_of, headless_chromium

QUESTION = "Quand le débat sur les blés a-t-il été renvoyé à jeudi ?"


def sign_in(page, ui_url: str) -> None:
    page.goto(f"{ui_url}/deployments")
    password = page.locator("input[type=password]")
    password.wait_for(timeout=30_000)  # the server asks for Prefect's auth string
    password.fill(AUTH_STRING)
    page.keyboard.press("Enter")
    page.get_by_role("link", name="ask", exact=True).first.wait_for(timeout=30_000)


def ask_run_ids(prefect_server) -> set[str]:
    with api(prefect_server) as client:
        rows = client.post("/flow_runs/filter", json={"deployments": {"name": {"any_": ["ask"]}}}).json()
    return {r["id"] for r in rows}


def finished_with_evidence(prefect_server, earlier: set[str], timeout_s: float = 600) -> str:
    """The id of the one `ask` run created since `earlier`, once it has completed and the API
    lists its evidence artifact."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with api(prefect_server) as client:
            rows = client.post("/flow_runs/filter", json={"deployments": {"name": {"any_": ["ask"]}}}).json()
        new = [r for r in rows if r["id"] not in earlier]
        assert len(new) <= 1, [r["name"] for r in new]
        if new and new[0]["state_type"] == "COMPLETED" and "ask-evidence" in artifacts_of(prefect_server, new[0]["id"]):
            return new[0]["id"]
        assert not new or new[0]["state_type"] not in ("FAILED", "CRASHED", "CANCELLED"), new[0]["state"]
        time.sleep(0.5)
    raise TimeoutError(f"the run submitted in the UI did not complete within {timeout_s:.0f} s")


def submitted(page, prefect_server, earlier: set[str], tmp_path: Path) -> None:
    """The form went to the deployment's runs after Submit; if not, the failure says what the page
    showed and whether a run was created (seen once on a loaded machine: neither a run nor the
    page's move in 120 s, with nothing else to go on)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_url(re.compile(r"tab=Runs"), timeout=120_000)  # a loaded machine took over 30 s
    except PlaywrightTimeout:
        shot = tmp_path / "after-submit.png"
        page.screenshot(path=str(shot), full_page=True)
        created = ask_run_ids(prefect_server) - earlier
        raise AssertionError(
            f"Submit did not lead to the deployment's runs in 120 s: still at {page.url}, "
            f"{len(created)} run(s) created; the page ({shot}) says: "
            f"{page.locator('body').inner_text()[-1500:]!r}") from None


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_researcher_asks_in_the_ui_and_reads_the_passages(prefect_server, serving, tmp_path: Path):
    from playwright.sync_api import expect

    with headless_chromium(tmp_path / "profile") as page:
        sign_in(page, prefect_server.ui_url)
        page.get_by_role("link", name="ask", exact=True).first.click()
        page.wait_for_url(re.compile(r"/deployments/deployment/"))
        page.get_by_text("Description", exact=True).first.click()
        expect(page.get_by_text("For researchers: ask a question").first).to_be_visible()
        page.get_by_role("button", name="Run", exact=True).first.click()
        page.get_by_text("Custom run").first.click()
        page.wait_for_url(re.compile(r"/run\b"))
        # the question is the form's first field; token, generation and judge come after it
        labels = [page.get_by_text(name, exact=True).first for name in
                  ("Question", "Access token (Optional)", "Generation (Optional)")]
        for label in labels:
            expect(label).to_be_visible()
        tops = [label.bounding_box()["y"] for label in labels]
        assert tops == sorted(tops), tops
        page.screenshot(path=str(tmp_path / "ask-form.png"), full_page=True)
        question = page.locator("textarea").first
        question.fill(QUESTION)
        expect(question).to_have_value(QUESTION)
        earlier = ask_run_ids(prefect_server)
        page.get_by_role("button", name="Submit").click()
        submitted(page, prefect_server, earlier, tmp_path)
        # the run the form created, followed through the API (not by reloading the page every
        # few seconds) until it has completed with its evidence: then the UI shows it as it is
        run_id = finished_with_evidence(prefect_server, earlier)
        page.reload()
        # the run is renamed from the question once the runner starts it
        run_link = page.get_by_role("link", name=re.compile(r"^ask: Quand le débat")).and_(
            page.locator(f'a[href*="{run_id}"]'))
        run_link.first.click()
        page.wait_for_url(re.compile(rf"/runs/flow-run/{run_id}"))
        expect(page.get_by_text("Completed").first).to_be_visible()
        # the page was opened after the API listed the artifact: its tab lists it
        page.get_by_text("Artifacts", exact=True).click()
        page.get_by_text("ask-evidence").first.click()
        page.wait_for_url(re.compile(r"/artifacts/artifact/"))
        # the passage itself, with the question's words marked, is on the page
        passage = page.locator("blockquote").filter(has_text="renvoyé à jeudi").first
        expect(passage).to_be_visible()
        # the question's words are marked: drawn bold inside the passage
        assert passage.evaluate(
            "el => [...el.querySelectorAll('*')].some(n => n.textContent.trim() === 'blés'"
            " && parseInt(getComputedStyle(n).fontWeight) >= 600)"), passage.inner_html()
        expect(page.get_by_role("heading", name=re.compile("débat sur les blés"))).to_be_visible()
        # serve runs the reading room: each document links to its evidence page there
        expect(page.get_by_role("link", name="evidence in the reading room").first).to_be_visible()
        page.screenshot(path=str(tmp_path / "ask-evidence.png"), full_page=True)
