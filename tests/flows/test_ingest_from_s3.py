"""`release` over an s3:// prefix (a real S3 endpoint on loopback) into a local warehouse, and the
scheduled ingest's s3:// drop folder and URI list lines."""
from __future__ import annotations

import json
from pathlib import Path

from flows.drop_folder import ScheduledIngestParams, collect_inputs
from flows.release import release
from tasks.ingest.acquire import AccessDefaults, iter_inputs
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table
from tests.conftest import settings_for
from tests.s3 import S3Bucket


def test_release_from_an_s3_prefix_records_s3_uris_and_reruns_publish_nothing(s3_bucket: S3Bucket,
                                                                              home: Path):
    client = s3_bucket.client()
    objects = {"drop/serie-a/lettre-1.txt": "Monsieur le Préfet, j'ai l'honneur de vous informer.",
               "drop/note.txt": "Note du conservateur sur le classement du fonds.",
               "drop/sidecar.json": json.dumps([{"file": "note.txt", "tenant": "prefecture",
                                                  "groups": ["agents"], "date": "1887-03-02"}])}
    for key, text in objects.items():
        client.put_object(Bucket=s3_bucket.name, Key=key, Body=text.encode())
    settings = settings_for(home, storage=s3_bucket.storage)  # warehouse stays local under home

    first = release([s3_bucket.uri("drop") + "/"], settings=settings)
    assert first.published and first.generation == "g0001" and first.quarantined == []
    assert first.counts.sources == 2
    layout = StoreLayout.from_settings(settings)
    revisions = read_lineage_table(layout, "g0001", "revisions").to_pylist()
    assert sorted(r["uri"] for r in revisions) == [f"s3://{s3_bucket.name}/drop/note.txt",
                                                   f"s3://{s3_bucket.name}/drop/serie-a/lettre-1.txt"]
    note = next(r for r in revisions if r["doc_id"] == "note")
    assert (note["tenant"], list(note["groups"]), note["date"]) == ("prefecture", ["agents"], "1887-03-02")

    again = release([s3_bucket.uri("drop")], settings=settings)
    assert not again.published and again.generation == "g0001"
    assert again.run.unchanged == 2 and again.run.added == again.run.changed == 0


def test_an_s3_drop_folder_and_s3_lines_of_the_uri_list_reach_acquire(s3_bucket: S3Bucket, tmp_path: Path):
    client = s3_bucket.client()
    for key in ("drop/lettre.txt", "extra/registre.txt"):
        client.put_object(Bucket=s3_bucket.name, Key=key, Body=b"Texte.")
    listing = tmp_path / "uris.txt"
    listing.write_text(f"# extra\n{s3_bucket.uri('extra/registre.txt')}\nhttps://example.org/a.pdf\n", "utf-8")
    inputs = collect_inputs(ScheduledIngestParams(drop_folder=s3_bucket.uri("drop") + "/",
                                                  uri_list=str(listing)))
    # The line of the URI list is named, so an operator finds it (flows/cli's skip format).
    assert inputs.skipped == ["line 3 'https://example.org/a.pdf': scheme https:// is not read by "
                              "acquire (local paths, file:// and s3:// URIs are)"]
    quarantined: list = []
    pending = list(iter_inputs(inputs.paths, AccessDefaults(None, "default", ("public",)), quarantined,
                               s3_bucket.storage))
    assert quarantined == []
    assert [p.source.uri for p in pending] == [s3_bucket.uri("drop/lettre.txt"),
                                               s3_bucket.uri("extra/registre.txt")]
