"""Issue packages through the real release flow and the real question loop: articles are
documents like any other (tenant, validity, deletion), a question about an article's page-2 text
cites page 2 with its box, the same delivery again changes nothing, and a corrected page changes
only the articles on it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.operate import DeleteParams, delete
from flows.release import ReleaseOptions, release
from schemas.settings import LlmSettings
from tasks.access.principals import resolve_principal
from tasks.llm.registry import make_provider
from tasks.query.loop import answer_question
from tasks.query.retriever import Retriever
from tasks.store.layout import StoreLayout
from tests.conftest import settings_for
from tests.fixtures import newspaper_package as news

pytestmark = pytest.mark.slow

PAGE_TWO_QUESTION = "Qui a remis la médaille d'argent au meilleur éleveur de la commune de Tourouvre ?"
WITHDRAWN = "retire/1902-11-15/42"


def ask(settings, who: str, question: str = PAGE_TWO_QUESTION):
    principal = resolve_principal(settings, who)
    return answer_question(Retriever.open(settings, principal), question,
                           make_provider(LlmSettings(provider="rules")), settings.query,
                           layout=StoreLayout.from_settings(settings), principal=principal.model_dump())


def test_an_issue_package_is_articles_through_release_question_and_deletion(tmp_path: Path, home: Path):
    (home / "principals.json").write_text(json.dumps({
        "reader": {"tenant": "tenant-a", "groups": ["public"]},
        "stranger": {"tenant": "tenant-b", "groups": ["public"]}}), "utf-8")
    settings = settings_for(home)
    inbox = tmp_path / "inbox"
    news.make_package(inbox / "courrier")
    # the same issue delivered again under another name, withdrawn long ago: never shown
    withdrawn = news.make_package(inbox / "retire")
    (withdrawn / "sidecar.json").write_text(json.dumps([{"file": "data/mets.xml", "doc_id": WITHDRAWN,
                                                         "valid_to": "2001-01-01"}]))
    options = ReleaseOptions(tenant="tenant-a")

    first = release([str(inbox)], options, settings)
    assert first.published and first.quarantined == [] and first.run.added == 8

    package = ask(settings, "reader")
    top = package.documents[0]
    assert top.doc_id == f"{news.PREFIX}/a001" and top.title == "La foire de Mortagne"
    cited = top.evidence[0]
    assert cited.page == 2 and cited.bbox is not None
    x0, y0, x1, y1 = cited.bbox
    assert 0 <= x0 < x1 <= news.px(2100) and 0 <= y0 < y1 <= news.px(2970)  # pixels of page 2
    assert 0.6 < cited.ocr_confidence < 1 and 0.6 < top.ocr_confidence < 1
    assert not any(d.doc_id.startswith(WITHDRAWN) for d in package.documents)  # validity
    assert not any(d.doc_id.startswith("le_courrier") for d in ask(settings, "stranger").documents)  # tenant

    again = release([str(inbox)], options, settings)
    assert not again.published and again.run.unchanged == 8 and again.run.added == again.run.changed == 0

    news.make_package(inbox / "courrier", corrected=True)  # page 2 corrected and re-delivered
    corrected = release([str(inbox)], options, settings)
    assert corrected.published and corrected.run.changed == 2 and corrected.run.unchanged == 6

    delete(DeleteParams(doc_ids=[f"{news.PREFIX}/a001"], reason="rights"), settings=settings)
    after = ask(settings, "reader")
    assert f"{news.PREFIX}/a001" not in {d.doc_id for d in after.documents}
