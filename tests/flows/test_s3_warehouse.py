"""The warehouse on S3-compatible storage (a real S3 server on loopback), end to end.

Blobs, the LanceDB table and its generation tags, Parquet lineage, BM25 indexes and caches all
live under an s3:// prefix; the manifests stay in a local folder. Ingest, ask, lineage, promote,
rollback, delete and gc behave exactly as with a local warehouse, and a deletion leaves no object
in the bucket that still holds the document.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.operate import DeleteParams, PromoteParams, RollbackParams, delete, gc, promote, rollback
from flows.release import ReleaseOptions, release
from schemas.retrieval import Principal
from tasks.query.retriever import Retriever
from tasks.store.layout import StoreLayout
from tasks.store.lineage_query import document_lineage
from tasks.store.lineage_store import read_lineage_table
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records
from tests.s3 import SECRET as S3_SECRET_KEY

PUBLIC = Principal(principal_id="default", tenant="default", groups=["public"])
MABILLON = Path(sys.executable).with_name("mabillon")
MARKER = "Anselme Vaudrécourt-Pélissier"  # only in the document to be deleted
SECRET = {"doc_id": "gaulois-1887-03-06", "corpus": "le_gaulois", "date": "1887-03-06",
          "text": f"Échos. M. {MARKER}, receveur des finances à Mortagne, est nommé à Évreux; "
                  "ses administrés regretteront sa bonne humeur et ses dîners du jeudi."}
QUESTIONS = ["débat sur les blés renvoyé à jeudi", "projet de loi sur les sucres", "cultivateurs de la Brie"]


def s3_settings(home: Path, bucket, **overrides):
    return settings_for(home, warehouse_dir=bucket.uri("warehouse"), storage=bucket.storage, **overrides)


def objects_containing(bucket, needle: str) -> list[str]:
    client, data = bucket.client(), needle.encode("utf-8")
    return [k for k in bucket.keys() if data in client.get_object(Bucket=bucket.name, Key=k)["Body"].read()]


def recorded_flow_parameters() -> str:
    """Every flow run's parameters as the Prefect API holds (and the UI shows) them."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(limit=200)
    assert runs
    return json.dumps([r.parameters for r in runs], default=str)


def vector_cache_stamps(bucket) -> dict[str, tuple]:
    pages = bucket.client().get_paginator("list_objects_v2").paginate(
        Bucket=bucket.name, Prefix="warehouse/caches/vectors/")
    stamps = {o["Key"]: (o["ETag"], o["LastModified"]) for p in pages for o in p.get("Contents", [])}
    assert stamps
    return stamps


def local_files_containing(root: Path, needle: str) -> list[Path]:
    data = needle.encode("utf-8")
    return [p for p in root.rglob("*") if p.is_file() and data in p.read_bytes()]


def ranked_ids(settings) -> list[list[str]]:
    retriever = Retriever.open(settings, PUBLIC)
    return [[h.doc_id for h in retriever.warm_start(q, k=10)] for q in QUESTIONS]


def test_a_generation_is_published_to_and_served_from_s3(tmp_path: Path, home: Path, s3_bucket):
    settings = s3_settings(home, s3_bucket)
    result = release(paths=[str(write_records(tmp_path / "a.jsonl", SAMPLE_RECORDS))], settings=settings)
    assert result.published and result.serving and result.generation == "g0001"
    keys = s3_bucket.keys("warehouse/")
    for part in ("blobs/sha256/", "lance/chunks.lance/_refs/tags/g0001", "lineage/g0001/chunks.parquet",
                 "caches/vectors/"):
        assert any(k.startswith(f"warehouse/{part}") for k in keys), part
    assert not (home / "warehouse").exists()  # nothing of the warehouse on the local disk
    assert (home / "manifests" / "routing.json").exists()  # the switch stays a local atomic rename

    retriever = Retriever.open(settings, PUBLIC)
    assert retriever.warm_start("débat sur les blés renvoyé à jeudi", k=3)[0].doc_id.startswith(("jo-", "gaulois-"))
    assert any(k.startswith("warehouse/indexes/g0001/lexical-") for k in s3_bucket.keys("warehouse/indexes/"))

    layout = StoreLayout.from_settings(settings)
    lineage = document_lineage(layout, "g0001", "jo-1887-03-02")
    blob_uri = lineage["revisions"][0]["blob"]
    assert blob_uri.startswith(f"s3://{s3_bucket.name}/warehouse/blobs/sha256/")
    stored = s3_bucket.client().get_object(Bucket=s3_bucket.name, Key=blob_uri.split("/", 3)[3])["Body"].read()
    assert json.loads(stored)["doc_id"] == "jo-1887-03-02"

    recorded = recorded_flow_parameters()
    assert S3_SECRET_KEY not in recorded and "\"secret_access_key\": \"**********\"" in recorded  # masked

    cached = vector_cache_stamps(s3_bucket)
    again = release(paths=[str(tmp_path / "a.jsonl")], settings=settings)
    assert not again.published and again.run.unchanged == len(SAMPLE_RECORDS)
    assert vector_cache_stamps(s3_bucket) == cached  # nothing re-embedded: the S3 caches were reused


def test_rollback_on_s3_restores_the_previous_answers_exactly(tmp_path: Path, home: Path, s3_bucket):
    settings = s3_settings(home, s3_bucket)
    release(paths=[str(write_records(tmp_path / "a.jsonl", SAMPLE_RECORDS[:3]))], settings=settings)
    edited = [dict(r) for r in SAMPLE_RECORDS]
    edited[0]["text"] = "Une chronique mondaine sans rapport avec la Chambre."
    release(paths=[str(write_records(tmp_path / "b.jsonl", edited))], options=ReleaseOptions(promote=False),
            settings=settings)
    before = ranked_ids(settings)
    promote(PromoteParams(generation="g0002"), settings=settings)
    assert ranked_ids(settings) != before
    rollback(RollbackParams(reason="bad promotion"), settings=settings)
    assert ranked_ids(settings) == before


def test_delete_on_s3_masks_at_once_and_leaves_no_object_holding_the_document(
        tmp_path: Path, home: Path, s3_bucket):
    settings = s3_settings(home, s3_bucket)
    release(paths=[str(write_records(tmp_path / "a.jsonl", [*SAMPLE_RECORDS, SECRET]))], settings=settings)
    assert SECRET["doc_id"] in [h.doc_id for h in Retriever.open(settings, PUBLIC).warm_start(MARKER, k=5)]
    holding = objects_containing(s3_bucket, MARKER)
    for part in ("blobs/", "lance/chunks.lance/data/", "lineage/g0001/", "caches/parsed/"):
        assert any(k.startswith(f"warehouse/{part}") for k in holding), part  # so "none left" means something

    result = delete(DeleteParams(doc_ids=[SECRET["doc_id"]], reason="droit à l'oubli"), settings=settings)
    assert result.generation == "g0002" and result.purged_after_s is not None
    assert SECRET["doc_id"] not in [h.doc_id for h in Retriever.open(settings, PUBLIC).warm_start(MARKER, k=5)]
    assert objects_containing(s3_bucket, MARKER) == []
    assert local_files_containing(home, MARKER) == []
    layout = StoreLayout.from_settings(settings)
    assert SECRET["doc_id"] not in read_lineage_table(layout, "g0001", "sources")["doc_id"].to_pylist()
    rollback(RollbackParams(to="g0001"), settings=settings)
    assert SECRET["doc_id"] not in [h.doc_id for h in Retriever.open(settings, PUBLIC).warm_start(MARKER, k=5)]


def test_gc_on_s3_removes_retired_generations_from_the_bucket(tmp_path: Path, home: Path, s3_bucket):
    from schemas.settings import RetentionSettings

    settings = s3_settings(home, s3_bucket, retention=RetentionSettings(keep_last=1))
    for n in range(3):
        records = [dict(r, text=r["text"] + f" Édition {n}.") for r in SAMPLE_RECORDS[:2]]
        release(paths=[str(write_records(tmp_path / f"{n}.jsonl", records))], settings=settings)
    report = gc(settings=settings)
    assert report.retired == ["g0001", "g0002"] and report.kept == ["g0003"]
    keys = s3_bucket.keys("warehouse/")
    assert not any(k.startswith(("warehouse/lineage/g0001/", "warehouse/lineage/g0002/")) for k in keys)
    tags = [k.rsplit("/", 1)[1] for k in keys if "/_refs/tags/" in k]
    assert tags == ["g0003.json"]
    assert ranked_ids(settings)  # the serving generation still answers


@pytest.mark.slow  # CLI processes with their servers: end-to-end
def test_the_cli_takes_the_warehouse_and_credentials_from_the_environment(tmp_path: Path, home: Path, s3_bucket,
                                                                          cli_prefect):
    env = {**os.environ, **s3_bucket.env, **cli_prefect.client_env(), "MABILLON_HOME": str(home),
           "MABILLON_WAREHOUSE_DIR": s3_bucket.uri("archive/warehouse")}
    export = write_records(tmp_path / "a.jsonl", SAMPLE_RECORDS)

    def cli(*args: str) -> dict:
        done = subprocess.run([str(MABILLON), *args, "--json"], env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    assert cli("ingest", str(export))["generation"] == "g0001"
    answer = cli("ask", "Quand le débat sur les blés a-t-il été renvoyé à jeudi ?")
    assert answer["documents"] and answer["generation"] == "g0001"
    assert cli("lineage", "jo-1887-03-02")["revisions"][0]["blob"].startswith(f"s3://{s3_bucket.name}/archive/")
    assert any(k.startswith("archive/warehouse/lance/") for k in s3_bucket.keys())
    assert not (home / "warehouse").exists()


@pytest.mark.slow
def test_served_deployments_work_on_the_s3_warehouse(served_home: Path, served_bucket, ask_run):
    """`mabillon serve` (as in the compose stack) published and answered from the bucket."""
    assert ask_run.state.is_completed(), ask_run.state.message
    keys = served_bucket.keys("warehouse/")
    assert any(k.startswith("warehouse/lance/chunks.lance/_refs/tags/g0001") for k in keys)
    assert any(k.startswith("warehouse/indexes/g0001/lexical-") for k in keys)  # built by the ask run
    assert not (served_home / "warehouse").exists()
