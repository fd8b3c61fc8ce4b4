"""The Prefect UI in headless Debian chromium, as a researcher uses it: sign in, open the `ask`
deployment, find the question as the form's first field, submit, and read the evidence."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.flows.conftest import AUTH_STRING, artifacts_of, headless_chromium

QUESTION = "Quand le débat sur les blés a-t-il été renvoyé à jeudi ?"


def sign_in(page, ui_url: str) -> None:
    page.goto(f"{ui_url}/deployments")
    password = page.locator("input[type=password]")
    password.wait_for(timeout=30_000)  # the server asks for Prefect's auth string
    password.fill(AUTH_STRING)
    page.keyboard.press("Enter")
    page.get_by_role("link", name="ask", exact=True).first.wait_for(timeout=30_000)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_researcher_asks_in_the_ui_and_reads_the_passages(prefect_server, serving, tmp_path: Path):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout, expect

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
        page.locator("textarea").first.fill(QUESTION)
        page.get_by_role("button", name="Submit").click()
        page.wait_for_url(re.compile(r"tab=Runs"))
        # the run is renamed from the question once the runner starts it
        run_link = page.get_by_role("link", name=re.compile(r"^ask: Quand le débat"))
        for _ in range(60):
            if run_link.count():
                break
            page.wait_for_timeout(5_000)
            page.reload()
        run_link.first.click()
        page.wait_for_url(re.compile(r"/runs/flow-run/"))
        for _ in range(60):  # the run goes Pending → Running → Completed
            if page.get_by_text("Completed").count():
                break
            page.wait_for_timeout(5_000)
            page.reload()
        expect(page.get_by_text("Completed").first).to_be_visible()
        # "Completed" may first be a task run's state: the run's artifact is what the page needs,
        # so wait (bounded) until the API lists it, then show the page as it is then
        run_id = page.url.split("/runs/flow-run/")[1].split("?")[0].split("/")[0]
        for _ in range(120):
            if "ask-evidence" in artifacts_of(prefect_server, run_id):
                break
            page.wait_for_timeout(1_000)
        # the tab lists what the UI fetched when it opened: on a loaded machine that can be
        # before the artifact reached its list, so look again (bounded) rather than fail
        for _ in range(10):
            page.reload()
            page.get_by_text("Artifacts", exact=True).click()
            try:
                page.get_by_text("ask-evidence").first.wait_for(timeout=10_000)
                break
            except PlaywrightTimeout:
                continue
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
