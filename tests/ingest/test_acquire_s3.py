"""Acquire reads s3:// objects and prefixes (a real S3 endpoint on loopback) exactly like local files
and folders; and file:// URIs like paths."""
from __future__ import annotations

import json
from pathlib import Path

from schemas.generation import Quarantined
from schemas.settings import StorageSettings
from tasks.ingest.acquire import AccessDefaults, acquire_one, iter_inputs
from tasks.store.layout import StoreLayout
from tests.flows.conftest import free_port
from tests.s3 import S3Bucket

DEFAULTS = AccessDefaults(corpus="fonds", tenant="archives", groups=("public",))


def put(bucket: S3Bucket, objects: dict[str, str | bytes]) -> None:
    client = bucket.client()
    for key, body in objects.items():
        client.put_object(Bucket=bucket.name, Key=key, Body=body.encode() if isinstance(body, str) else body)


def walk(sources: list[str], storage: StorageSettings):
    quarantined: list[Quarantined] = []
    inputs = list(iter_inputs(sources, DEFAULTS, quarantined, storage))
    return inputs, quarantined


def test_a_prefix_is_read_like_a_folder_with_its_sidecar(s3_bucket: S3Bucket):
    sidecar = [{"file": "a/acte.txt", "corpus": "etat-civil", "date": "1854-08-09", "tenant": "mairie",
                "groups": ["agents", "archivistes"], "cote": "E 12"}]
    put(s3_bucket, {"inbox/a/acte.txt": "Acte de naissance.", "inbox/lettre.txt": "Lettre.",
                    "inbox/sidecar.json": json.dumps(sidecar), "inbox/.trash/old.txt": "Vieux.",
                    "inbox/Thumbs.db": "x", "elsewhere/other.txt": "Autre."})
    inputs, quarantined = walk([s3_bucket.uri("inbox") + "/"], s3_bucket.storage)
    assert quarantined == []
    by_id = {i.source.doc_id: i.source for i in inputs}
    assert list(by_id) == ["a/acte", "lettre"]  # hidden parts, ignored names and other prefixes left out
    acte = by_id["a/acte"]
    assert (acte.corpus, acte.date, acte.tenant, acte.groups, acte.metadata) == (
        "etat-civil", "1854-08-09", "mairie", ["agents", "archivistes"], {"cote": "E 12"})
    assert acte.uri == f"s3://{s3_bucket.name}/inbox/a/acte.txt"
    assert (by_id["lettre"].tenant, by_id["lettre"].groups) == ("archives", ["public"])


def test_a_sidecar_row_naming_a_missing_object_is_reported_with_its_s3_uri(s3_bucket: S3Bucket):
    put(s3_bucket, {"inbox/lettre.txt": "Lettre.",
                    "inbox/sidecar.csv": "file,date\nabsent.txt,1854-08-09\nlettre.txt,1854-13-45\n"})
    inputs, quarantined = walk([s3_bucket.uri("inbox")], s3_bucket.storage)
    assert inputs == []
    reasons = {q.uri: q.reason for q in quarantined}
    assert "which is not in the folder" in reasons[f"s3://{s3_bucket.name}/inbox/absent.txt"]
    assert "not a calendar date" in reasons[f"s3://{s3_bucket.name}/inbox/lettre.txt"]


def test_a_prefix_with_nested_sidecars_applies_each_to_its_own_subtree(s3_bucket: S3Bucket):
    put(s3_bucket, {
        "fonds/sidecar.json": json.dumps([{"file": "serie-a/acte.txt", "corpus": "loin", "tenant": "loin"},
                                          {"file": "preface.txt", "corpus": "fonds-general"}]),
        "fonds/preface.txt": "Préface.", "fonds/divers.txt": "Divers.",
        "fonds/serie-a/sidecar.json": json.dumps([{"file": "acte.txt", "doc_id": "A/1", "corpus": "etat-civil",
                                                   "date": "1854-08-09", "tenant": "mairie",
                                                   "groups": ["agents"]}]),
        "fonds/serie-a/acte.txt": "Acte.",
        "fonds/serie-b/sous-serie/sidecar.csv": "file,corpus,groups\nplan.txt,cadastre,geometres;public\n",
        "fonds/serie-b/sous-serie/plan.txt": "Plan.",
        "fonds/serie-c/sidecar.json": "[{oops", "fonds/serie-c/x.txt": "X.", "fonds/serie-c/d/y.txt": "Y."})
    inputs, quarantined = walk([s3_bucket.uri("fonds")], s3_bucket.storage)
    by_id = {i.source.doc_id: i.source for i in inputs}
    assert sorted(by_id) == ["A/1", "divers", "preface", "serie-b/sous-serie/plan"]
    acte = by_id["A/1"]  # the nearest sidecar's row, whole
    assert (acte.corpus, acte.date, acte.tenant, acte.groups) == ("etat-civil", "1854-08-09", "mairie", ["agents"])
    assert acte.uri == f"s3://{s3_bucket.name}/fonds/serie-a/acte.txt"
    plan = by_id["serie-b/sous-serie/plan"]
    assert (plan.corpus, plan.tenant, plan.groups) == ("cadastre", "archives", ["geometres", "public"])
    assert by_id["preface"].corpus == "fonds-general"
    assert (by_id["divers"].corpus, by_id["divers"].tenant) == ("fonds", "archives")
    base = f"s3://{s3_bucket.name}/fonds/serie-c"
    assert sorted(q.uri for q in quarantined) == [f"{base}/d/y.txt", f"{base}/x.txt"]
    assert all(q.reason.startswith("sidecar unreadable: serie-c/sidecar.json is not valid JSON")
               for q in quarantined)


def test_one_object_is_named_by_its_stem_and_read_only_when_stored(s3_bucket: S3Bucket, tmp_path: Path):
    put(s3_bucket, {"scans/registre-1887.txt": "Registre des délibérations."})
    inputs, quarantined = walk([s3_bucket.uri("scans/registre-1887.txt")], s3_bucket.storage)
    assert quarantined == [] and len(inputs) == 1
    pending = inputs[0]
    assert pending.data is None  # nothing fetched yet
    assert (pending.source.doc_id, pending.source.title) == ("registre-1887", "registre-1887")
    layout = StoreLayout(tmp_path / "w", tmp_path / "m").ensure()
    revision = acquire_one(layout, pending)
    assert revision.uri == f"s3://{s3_bucket.name}/scans/registre-1887.txt"
    assert layout.blob_path(revision.digest).read_bytes() == "Registre des délibérations.".encode()
    again = acquire_one(layout, iter_inputs([s3_bucket.uri("scans/registre-1887.txt")], DEFAULTS, [],
                                            s3_bucket.storage).__next__())
    assert again.revision_id == revision.revision_id


def test_a_jsonl_export_object_quarantines_its_bad_lines_by_number(s3_bucket: S3Bucket):
    put(s3_bucket, {"exports/week.jsonl":
                    '{"doc_id": "a", "corpus": "c", "date": "1887-01-01", "text": "Premier."}\n'
                    'not json at all\n'
                    '{"doc_id": "b", "corpus": "c", "text": "Deuxième."}\n'.encode() + b"\xff\xfe\n"})
    inputs, quarantined = walk([s3_bucket.uri("exports/week.jsonl")], s3_bucket.storage)
    base = f"s3://{s3_bucket.name}/exports/week.jsonl"
    assert [(i.source.doc_id, i.source.uri) for i in inputs] == [("a", f"{base}#L1"), ("b", f"{base}#L3")]
    assert [(q.uri, q.line) for q in quarantined] == [(f"{base}#L2", 2), (f"{base}#L4", 4)]
    assert "not valid JSON" in quarantined[0].reason and "not UTF-8" in quarantined[1].reason


def test_a_missing_prefix_is_quarantined_and_the_batch_goes_on(s3_bucket: S3Bucket):
    put(s3_bucket, {"inbox/lettre.txt": "Lettre."})
    inputs, quarantined = walk([s3_bucket.uri("nothing-here"), "s3://no-such-bucket-x1/a.txt",
                                s3_bucket.uri("inbox")], s3_bucket.storage)
    assert [i.source.doc_id for i in inputs] == ["lettre"]
    assert [(q.uri, q.reason) for q in quarantined] == [
        (s3_bucket.uri("nothing-here"), f"no object or prefix at {s3_bucket.uri('nothing-here')}"),
        ("s3://no-such-bucket-x1/a.txt", "no object or prefix at s3://no-such-bucket-x1/a.txt")]


def test_an_unreachable_endpoint_is_quarantined_with_the_reason(tmp_path: Path):
    (tmp_path / "local.txt").write_text("Local.", "utf-8")
    down = StorageSettings(endpoint_url=f"http://127.0.0.1:{free_port()}", access_key_id="k",
                           secret_access_key="s")
    inputs, quarantined = walk(["s3://mabillon-down/inbox", str(tmp_path / "local.txt")], down)
    assert [i.source.doc_id for i in inputs] == ["local"]
    assert quarantined[0].uri == "s3://mabillon-down/inbox"
    assert quarantined[0].reason.startswith("unreadable: ") and "connect" in quarantined[0].reason.lower()


def test_file_uris_are_read_like_paths_and_other_schemes_are_refused(tmp_path: Path):
    folder = tmp_path / "dossier 1"
    folder.mkdir()
    (folder / "note.txt").write_text("Note.", "utf-8")
    inputs, quarantined = walk([folder.as_uri(), "http://example.org/a.pdf"], StorageSettings())
    assert [(i.source.doc_id, i.source.uri) for i in inputs] == [("note", (folder / "note.txt").as_uri())]
    assert quarantined == [Quarantined(uri="http://example.org/a.pdf", reason="scheme http:// is not read "
                                       "(local paths, file:// and s3:// URIs are)")]


def test_an_issue_package_under_a_prefix_is_read_like_one_in_a_folder(s3_bucket: S3Bucket, tmp_path: Path):
    from tests.fixtures import newspaper_package as news

    bag = news.make_package(tmp_path / "bag")
    put(s3_bucket, {f"drop/bag/{p.relative_to(bag).as_posix()}": p.read_bytes() for p in bag.rglob("*") if p.is_file()})
    remote, quarantined = walk([s3_bucket.uri("drop") + "/"], s3_bucket.storage)
    local, _ = walk([str(tmp_path)], StorageSettings())
    assert quarantined == []
    assert {i.source.doc_id: i.read() for i in remote} == {i.source.doc_id: i.read() for i in local}
    assert remote[0].source.uri == f"s3://{s3_bucket.name}/drop/bag/data/mets.xml#ART1"
