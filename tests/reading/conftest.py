"""A home with the bundled sample ingested (scans, digital and scanned PDF, ALTO with its page
image, HTML, DOCX, text), a tenant-B record export, principals with access tokens, and the
reading room app over it. Chunks are small (40 tokens), so a scanned page holds several chunks
and a citation covers only part of it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from flows.make_sample import alto_xml, image_bytes, make_sample, render_scan, source_text
from schemas.settings import ChunkingSettings, MabillonSettings
from tasks.access.principals import token_digest
from tests.conftest import write_records
from tests.reading.iiif_grid import validator_test_image, write_scanned_pdf

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
VALIDATOR_DOC = "iiif/validator-grid"  # the IIIF validator's test image, as a scanned PDF
# ALTO pages delivered without their images (issue 33 item 6): one alone, one whose delivery
# names the library's IIIF image service for its page (as a Gallica package does)
ALTO_ONLY_DOC = "livraison-alto/echo-vexin-1888-03-12"
ALTO_SERVICE_DOC = "livraison-alto/echo-vexin-1888-03-19"
ALTO_SERVICE = "https://gallica.example.org/iiif/ark:/12148/bpt6k000000x/f1"
ALTO_QUESTION = "Où le conseil d'arrondissement du Vexin a-t-il voté la construction d'un lavoir communal ?"
ALTO_TEXTS = {
    ALTO_ONLY_DOC: "L'Écho du Vexin, 12 mars 1888. Le conseil d'arrondissement a voté la construction "
                   "d'un lavoir communal au hameau des Ormeaux, sur le ru de la Viosne, pour la somme "
                   "de trois mille francs. Les travaux commenceront après les semailles.",
    ALTO_SERVICE_DOC: "L'Écho du Vexin, 19 mars 1888. La foire aux chevaux de Magny s'est tenue sous "
                      "la pluie ; les éleveurs du Vexin ont vendu quarante juments percheronnes.",
}
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
    delivery = sample / "livraison-alto"
    delivery.mkdir()
    for doc_id, text in ALTO_TEXTS.items():
        (delivery / f"{doc_id.rsplit('/', 1)[1]}.xml").write_text(alto_xml(text), "utf-8")
    (delivery / "sidecar.json").write_text(json.dumps([{
        "file": f"{ALTO_SERVICE_DOC.rsplit('/', 1)[1]}.xml", "page_images": {"1": ALTO_SERVICE}}]), "utf-8")
    grid = validator_test_image()
    if grid is not None:
        (sample / "iiif").mkdir()
        write_scanned_pdf(grid, sample / "iiif" / "validator-grid.pdf")
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
