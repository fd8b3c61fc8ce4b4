"""A home with the bundled sample ingested (scans, digital and scanned PDF, ALTO with its page
image, HTML, DOCX, text), a tenant-B record export, principals with access tokens, and the
reading room app over it. Chunks are small (40 tokens), so a scanned page holds several chunks
and a citation covers only part of it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from flows.make_sample import image_bytes, make_sample, render_scan, source_text
from schemas.settings import ChunkingSettings, MabillonSettings
from tasks.query.principals import token_digest
from tests.conftest import write_records

TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-9876543210",
          "carol": "carol-token-5555555555"}
PRINCIPALS = {
    "alice": {"tenant": "default", "groups": ["public"]},
    "carol": {"tenant": "default", "groups": ["public"]},
    "bob": {"tenant": "tenant-b", "groups": ["public"]},
}
SCAN_QUESTION = "Quels commissaires le conseil de Vaux-le-Moutier charge-t-il de visiter les greniers ?"
SCAN_DOC = "deliberations/vaux-le-moutier-an-2-brumaire-22"
TEXT_QUESTION = "Quelles réparations le conseil municipal de Saint-Aubin-des-Bois a-t-il votées pour l'école ?"
TEXT_DOC = "deliberations/saint-aubin-1887-03-14"
TENANT_B_DOC = "b/registre-secret-1790"
TENANT_B_RECORDS = [{"doc_id": TENANT_B_DOC, "corpus": "secret", "date": "1790-05-01",
                     "text": "Registre du tenant B : les greniers de Vaux-le-Moutier furent visités "
                             "par le citoyen Morin, commissaire, qui dressa procès-verbal."}]


def write_principals(home: Path, principals: dict) -> None:
    table = {name: {**entry, "token_sha256": token_digest(TOKENS[name])}
             for name, entry in principals.items()}
    (home / "principals.json").write_text(json.dumps(table), "utf-8")


def settings_of(home: Path, **reading_room) -> MabillonSettings:
    settings = MabillonSettings(home=home, chunking=ChunkingSettings(target_tokens=40))
    if reading_room:
        settings = settings.model_copy(update={
            "reading_room": settings.reading_room.model_copy(update=reading_room)})
    return settings


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory) -> Path:
    """Built once per run (tests.homes.built_once); each worker reads its own copy, since the
    room writes its query records into the home."""
    from tests.homes import built_once

    template = built_once(tmp_path_factory, "reading-sample-home", _build_sample_home) / "home"
    return copy_home(template, tmp_path_factory.mktemp("reading") / "home")


def _build_sample_home(root: Path) -> None:
    from flows.release import ReleaseOptions, release

    sample = root / "sample"
    make_sample(sample)
    # the newspaper page image beside its ALTO (same stem), as a digitisation delivers them
    (sample / "courrier-canton-1902.png").write_bytes(
        image_bytes(render_scan(source_text("courrier-canton-1902")), "PNG"))
    home = root / "home"
    home.mkdir()
    write_principals(home, PRINCIPALS)
    settings = settings_of(home)
    release(paths=[str(sample)], settings=settings)
    records = write_records(root / "tenant-b.jsonl", TENANT_B_RECORDS)
    release(paths=[str(records)], options=ReleaseOptions(tenant="tenant-b", groups=["public"]),
            settings=settings)


def copy_home(home: Path, target: Path) -> Path:
    """An independent copy of a local home (warehouse and manifests), to change freely."""
    shutil.copytree(home, target)
    return target


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@pytest.fixture(scope="session")
def room_client(sample_home):
    from fastapi.testclient import TestClient

    from flows.reading_room import create_app

    with TestClient(create_app(settings_of(sample_home), warm=False)) as client:
        yield client


@pytest.fixture(scope="session")
def asked(room_client) -> dict[str, str]:
    """Query ids of questions asked through the room's question box, by (asker, question)."""
    out = {}
    for name, question in (("alice", SCAN_QUESTION), ("alice", TEXT_QUESTION), ("bob", SCAN_QUESTION)):
        r = room_client.post("/ask", data={"question": question}, headers=bearer(name),
                             follow_redirects=False)
        assert r.status_code == 303, r.text
        out[(name, question)] = r.headers["location"].rsplit("/", 1)[1]
    return out
