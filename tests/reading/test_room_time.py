"""The reading room's access check follows the time rule and the routing record: a document under
embargo or withdrawn answers 404 like one that does not exist, appears exactly when its embargo
ends (no new generation) and at an `?as_of=` inside its interval; a canary group reads its
candidate generation; a tombstone hides a document on every route at once."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from flows.operate import CanaryParams, canary
from flows.release import ReleaseOptions, release
from schemas.settings import MabillonSettings
from tasks.access.principals import token_digest
from tasks.store.layout import StoreLayout
from tasks.store.tombstones import add_tombstones
from tests.conftest import write_records

EMBARGO_ENDS = datetime(2099, 1, 1, tzinfo=timezone.utc)
OPEN = {"doc_id": "rr/ouvert", "corpus": "journal_officiel", "date": "1887-03-02",
        "text": "Séance du 2 mars. La Chambre discute les droits sur les blés."}
EMBARGOED = {"doc_id": "rr/reserve", "corpus": "journal_officiel", "date": "1887-03-02",
             "valid_from": EMBARGO_ENDS.isoformat(), "text": "Note réservée sur les droits sur les blés."}
WITHDRAWN = {"doc_id": "rr/retire", "corpus": "journal_officiel", "date": "1887-03-02",
             "valid_to": "2001-01-01", "text": "Pièce retirée sur les droits sur les blés."}
CANDIDATE = {"doc_id": "rr/nouveau", "corpus": "journal_officiel", "date": "1887-03-11",
             "text": "Suite de la discussion sur les sucres."}
PRINCIPALS = {"alice": ["public"], "carol": ["public", "staff"]}


def token(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {name}-token-0123456789"}


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    """g0001 serves (three documents, two outside their interval now); g0002 adds one more and
    is a canary for `staff`."""
    from fastapi.testclient import TestClient

    from flows.reading_room import create_app

    root = tmp_path_factory.mktemp("room-time")
    home = root / "home"
    home.mkdir()
    (home / "principals.json").write_text(json.dumps({
        name: {"tenant": "default", "groups": groups,
               "token_sha256": token_digest(token(name)["Authorization"][7:])}
        for name, groups in PRINCIPALS.items()}), "utf-8")
    settings = MabillonSettings(home=home)
    release(paths=[str(write_records(root / "a.jsonl", [OPEN, EMBARGOED, WITHDRAWN]))], settings=settings)
    release(paths=[str(write_records(root / "b.jsonl", [CANDIDATE]))],
            options=ReleaseOptions(promote=False), settings=settings)
    canary(CanaryParams(generation="g0002", groups=["staff"], reason="try"), settings=settings)
    with TestClient(create_app(settings, warm=False)) as client:
        yield client, settings


@pytest.fixture
def own_room(room, tmp_path):
    """A copy of the module's home behind a room of its own, for a test that changes the home."""
    import shutil

    from fastapi.testclient import TestClient

    from flows.reading_room import create_app

    settings = MabillonSettings(home=shutil.copytree(room[1].home, tmp_path / "home"))
    with TestClient(create_app(settings, warm=False)) as client:
        yield client, settings


def status(client, who: str, doc_id: str, as_of: str | None = None) -> int:
    query = f"?as_of={as_of}" if as_of else ""
    return client.get(f"/documents/{doc_id}{query}", headers=token(who)).status_code


@pytest.mark.parametrize("who", sorted(PRINCIPALS))
def test_outside_its_interval_a_document_is_not_found_and_as_of_looks_back(room, who):
    client, _ = room
    assert status(client, who, OPEN["doc_id"]) == 200
    assert status(client, who, EMBARGOED["doc_id"]) == status(client, who, "rr/nothing") == 404
    assert status(client, who, WITHDRAWN["doc_id"]) == 404
    assert status(client, who, WITHDRAWN["doc_id"], "2000-06-01") == 200
    listed = client.get("/documents", headers=token(who)).text
    assert OPEN["doc_id"] in listed and EMBARGOED["doc_id"] not in listed
    # looking ahead past an embargo is for operators; an unreadable time is a 400 that says why
    ahead = client.get(f"/documents/{EMBARGOED['doc_id']}?as_of=2100-01-01", headers=token(who))
    assert ahead.status_code == 403 and "operator" in ahead.text
    bad = client.get(f"/documents/{OPEN['doc_id']}?as_of=la-semaine-derniere", headers=token(who))
    assert bad.status_code == 400 and "as_of" in bad.text


def test_a_past_view_keeps_its_time_in_every_address_it_gives(room):
    """A page seen at an as_of links to pages and IIIF resources at that as_of: a document
    withdrawn since is still readable through them, and only through them."""
    client, settings = room
    from tasks.store.lineage_query import document_lineage

    revision = document_lineage(StoreLayout.from_settings(settings), "g0001",
                                WITHDRAWN["doc_id"])["source"]["current_revision_id"]
    listed = client.get("/documents?as_of=2000-06-01", headers=token("alice")).text
    assert f"/documents/{WITHDRAWN['doc_id']}?as_of=2000-06-01" in listed
    past = f"/at/2000-06-01/iiif/manifest/{revision}"
    manifest = client.get(past, headers=token("alice"))
    # a record has no page image, so no manifest (no canvas: tasks/reading/iiif_manifests.py); at that
    # time its revision is found and the 404 says why, where now it is a withdrawn one's bare 404
    assert manifest.status_code == 404 and "no page images" in manifest.json()["error"]
    now = client.get(f"/iiif/manifest/{revision}", headers=token("alice"))
    assert now.status_code == 404 and now.json()["error"] == "not found"
    assert client.get(f"/at/2100-01-01/iiif/manifest/{revision}", headers=token("alice")).status_code == 403
    assert client.get(f"/at/hier/iiif/manifest/{revision}", headers=token("alice")).status_code == 400


def test_an_embargoed_document_appears_when_its_embargo_ends(room, monkeypatch):
    client, _ = room
    import tasks.reading.access as access

    monkeypatch.setattr(access, "now_utc", lambda: datetime(2098, 12, 31, 23, 59, 59, tzinfo=timezone.utc))
    assert status(client, "alice", EMBARGOED["doc_id"]) == 404
    monkeypatch.setattr(access, "now_utc", lambda: EMBARGO_ENDS)
    assert status(client, "alice", EMBARGOED["doc_id"]) == 200


def test_the_canary_group_reads_its_candidate_and_a_tombstone_hides_on_every_route(own_room):
    client, settings = own_room
    assert status(client, "carol", CANDIDATE["doc_id"]) == 200
    assert status(client, "alice", CANDIDATE["doc_id"]) == 404
    assert "g0002" in client.get("/documents", headers=token("carol")).text
    add_tombstones(StoreLayout.from_settings(settings), [OPEN["doc_id"]], "test", "rights")
    assert status(client, "alice", OPEN["doc_id"]) == status(client, "carol", OPEN["doc_id"]) == 404
