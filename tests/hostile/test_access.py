"""Access under attack: tenant isolation under every agent tool (exact substring of the other
tenant's words included), in query records and artifacts; a principal without groups sees
nothing; a policy changed between two questions applies to the second at once."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from flows.ask import AskParams, ask
from flows.release import ReleaseOptions, release
from schemas.query import LoopParams
from schemas.retrieval import AccessDenied, Principal
from tasks.access.principals import resolve_principal, resolve_token, token_digest
from tasks.llm.replay import ReplayProvider
from tasks.llm.rules import RulesProvider
from tasks.query.loop import answer_question
from tasks.query.retriever import Retriever
from tasks.store.layout import StoreLayout
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records
from tests.query.loop_helpers import everything, search

MARKER = "Anselme Périgord-Vauquelin"
SECRET = {"doc_id": "b-comite-secret", "corpus": "journal_officiel", "date": "1887-03-02",
          "tenant": "tenant-b", "groups": ["public"],
          "text": f"Comité secret du 2 mars 1887. M. {MARKER} obtient le renvoi à jeudi du débat sur "
                  "les blés, contre l'avis des cultivateurs de la Brie."}
QUESTION = "Pourquoi le débat sur les blés a-t-il été renvoyé à jeudi ?"


def principals(home: Path, table: dict) -> None:
    (home / "principals.json").write_text(json.dumps(table), "utf-8")


@pytest.fixture(scope="module")
def tenants(tmp_path_factory):
    root = tmp_path_factory.mktemp("tenants")
    home = root / "home"
    home.mkdir()
    principals(home, {"alice": {"tenant": "tenant-a", "groups": ["public"]},
                      "bob": {"tenant": "tenant-b", "groups": ["public"]},
                      "nogroups": {"tenant": "tenant-a", "groups": [], "token_sha256": token_digest("ng")}})
    settings = settings_for(home)
    release(paths=[str(write_records(root / "x.jsonl", [*SAMPLE_RECORDS, SECRET]))],
            options=ReleaseOptions(tenant="tenant-a"), settings=settings)
    return settings


def leaks(value) -> bool:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return MARKER in text or SECRET["doc_id"] in text or "Comité secret" in text


@pytest.mark.slow
def test_every_tool_of_the_loop_run_by_tenant_a_finds_nothing_of_tenant_b(tenants, tmp_path):
    alice = resolve_principal(tenants, "alice")
    retriever = Retriever.open(tenants, alice)
    script = {"plan": [{"sub_questions": [{"text": QUESTION, "target_corpus": None, "entities": [MARKER]}]}],
              "search": [search("substring", text=MARKER), search("substring", text="Comité secret"),
                         search("bm25", query=f"{MARKER} comité secret"),
                         search("dense", query=f"Comité secret {MARKER} renvoi des blés"),
                         search("date_range", date_from="1887-03-02", date_to="1887-03-02", query=MARKER),
                         search("finish")],
              "review": [everything("accept")] * 6}
    layout = StoreLayout.from_settings(tenants)
    package = answer_question(retriever, QUESTION, ReplayProvider(script, fallback=RulesProvider()),
                              LoopParams(replan=False, step_budget=20), layout=layout,
                              principal=alice.model_dump())
    record = json.loads(Path(package.record).read_text("utf-8"))
    tools = [s["channel"]["tool"] for s in record["steps"] if s.get("channel")]
    assert {"substring", "bm25", "dense", "date_range"} <= set(tools)  # every tool ran
    # the other tenant's principal does find it, with the same tools: the test can fail
    bob = Retriever.open(tenants, resolve_principal(tenants, "bob"))
    found = bob.substring_chunks(MARKER, 5)
    assert found[0].doc_id == SECRET["doc_id"]
    # the searches' own arguments hold the words asked for; what must never appear is what
    # only B's document holds: its id, its chunk ids, its text beyond what was searched
    secret = [SECRET["doc_id"], *(h.chunk_id for h in found), "contre l'avis des cultivateurs"]
    for seen in (json.dumps(package.model_dump(mode="json"), ensure_ascii=False),
                 json.dumps({k: v for k, v in record.items() if k != "steps"}, ensure_ascii=False),
                 json.dumps([s.get("channel") and s["channel"]["hits"] for s in record["steps"]])):
        assert not any(x in seen for x in secret)
    assert package.documents and all(d.doc_id != SECRET["doc_id"] for d in package.documents)


def test_a_principal_with_no_groups_is_refused_on_every_door(tenants):
    with pytest.raises(AccessDenied, match="needs a tenant and at least one group"):
        resolve_principal(tenants, "nogroups")
    with pytest.raises(AccessDenied) as refused:
        resolve_token(tenants, "ng")
    assert str(refused.value) == "invalid access token"
    with pytest.raises(AccessDenied, match="no tenant or no groups"):
        Retriever.open(tenants, Principal(principal_id="x", tenant="tenant-a", groups=[]))


@pytest.mark.slow
def test_the_ask_flow_with_a_groupless_principal_fails_clearly_and_writes_nothing(tenants):
    queries = StoreLayout.from_settings(tenants).queries
    before = set(queries.glob("*.json")) if queries.exists() else set()
    with pytest.raises(AccessDenied) as refused:
        ask(AskParams(question=QUESTION, principal="nogroups", provider="rules"), settings=tenants)
    assert "at least one group" in str(refused.value) and not leaks(str(refused.value))
    after = set(queries.glob("*.json")) if queries.exists() else set()
    assert after == before


@pytest.mark.slow
def test_a_policy_change_between_two_questions_applies_to_the_second(tenants):
    home = tenants.home
    original = (home / "principals.json").read_text("utf-8")
    try:
        first = ask(AskParams(question=QUESTION, principal="alice", provider="rules"), settings=tenants)
        assert first.documents and not leaks(first.model_dump(mode="json"))
        # alice moves to tenant B: her next question sees B's document and nothing of A
        table = json.loads(original)
        table["alice"] = {"tenant": "tenant-b", "groups": ["public"]}
        principals(home, table)
        second = ask(AskParams(question=QUESTION, principal="alice", provider="rules"), settings=tenants)
        assert [d.doc_id for d in second.documents] == [SECRET["doc_id"]]
        # and then loses her groups' access: a group with no documents sees nothing at all
        table["alice"] = {"tenant": "tenant-b", "groups": ["archivistes"]}
        principals(home, table)
        third = ask(AskParams(question=QUESTION, principal="alice", provider="rules"), settings=tenants)
        assert third.documents == [] and third.accepted == []
        # removed from the table: refused
        del table["alice"]
        principals(home, table)
        with pytest.raises(AccessDenied):
            ask(AskParams(question=QUESTION, principal="alice", provider="rules"), settings=tenants)
    finally:
        (home / "principals.json").write_text(original, "utf-8")
        time.sleep(0.01)
