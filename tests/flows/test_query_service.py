"""The warm query service of `mabillon serve`: answers from an open retriever, but never from one
built under a policy that has changed since (a deletion, a change of principals.json)."""
from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from flows.query_service import QueryService, ServiceRefused, ask_service
from schemas.settings import MabillonSettings
from tasks.store.layout import StoreLayout
from tasks.store.tombstones import add_tombstones
from tests.conftest import SAMPLE_RECORDS, write_records

QUESTION = "Le débat sur les blés a-t-il été renvoyé à jeudi ?"


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    from flows.release import release

    root = tmp_path_factory.mktemp("query-service")
    settings = MabillonSettings(home=root / "home")
    release(paths=[str(write_records(root / "a.jsonl", SAMPLE_RECORDS))], settings=settings)
    svc = QueryService(settings).start(warm=False)
    yield svc
    svc.stop()


@pytest.fixture
def own_service(service, tmp_path):
    """A service of its own on a copy of the module's home, for a test that changes the home
    (a deletion, the principals) or counts the retrievers it opens."""
    import shutil

    settings = MabillonSettings(home=shutil.copytree(service.settings.home, tmp_path / "home"))
    svc = QueryService(settings).start(warm=False)
    yield svc
    svc.stop()


def ids(package: dict) -> list[str]:
    return [d["doc_id"] for d in package["documents"]]


def test_a_wrong_key_is_refused(service):
    with pytest.raises(ServiceRefused) as refused:
        ask_service(service.url, "not-the-key", {"question": QUESTION})
    assert refused.value.payload["kind"] == "access_denied"


def test_the_open_retriever_is_reused_until_a_deletion(own_service):
    service = own_service
    first = ask_service(service.url, service.key, {"question": QUESTION})
    assert "gaulois-1887-03-03" in ids(first)
    ask_service(service.url, service.key, {"question": "Que dit M. Méline des sucres ?"})
    assert len(service.retrievers._open) == 1  # same generation, principal, tombstones: reused
    add_tombstones(StoreLayout.from_settings(service.settings), ["gaulois-1887-03-03"], "test", "rights")
    after = ask_service(service.url, service.key, {"question": QUESTION})
    assert "gaulois-1887-03-03" not in ids(after)  # the next answer already honours it


def test_a_principal_removed_from_the_policy_is_refused_at_once(own_service):
    service = own_service
    path = Path(service.settings.home) / "principals.json"
    path.write_text(json.dumps({"alice": {"tenant": "default", "groups": ["public"]}}), "utf-8")
    assert ids(ask_service(service.url, service.key, {"question": QUESTION, "principal": "alice"}))
    path.write_text(json.dumps({}), "utf-8")
    with pytest.raises(ServiceRefused) as refused:
        ask_service(service.url, service.key, {"question": QUESTION, "principal": "alice"})
    assert refused.value.payload["code"] == 4 and refused.value.payload["error"].startswith("unknown principal")


def test_an_empty_question_is_a_usage_error(service):
    with pytest.raises(ServiceRefused) as refused:
        ask_service(service.url, service.key, {"question": "    "})
    assert refused.value.payload["code"] == 2


def test_nothing_listens_beyond_loopback(service):
    assert service.url.startswith("http://127.0.0.1:")
    assert httpx.get(service.url + "/ask", timeout=5).status_code == 501  # GET is not served
