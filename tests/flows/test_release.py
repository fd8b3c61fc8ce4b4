"""The release flow end to end on small exports: real LanceDB, real Prefect (ephemeral), real model."""
from pathlib import Path

import duckdb
import pytest

from flows.release import ReleaseOptions, release
from schemas.generation import ValidationFailed
from schemas.settings import ExpectationConfig, ValidationSettings
from tasks.store.lance_store import open_generation_table
from tasks.store.layout import StoreLayout
from tasks.store.lineage_query import chunk_join_report, document_lineage
from tasks.store.routing import read_routing
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records


def test_first_ingest_publishes_and_serves(records_file: Path, home: Path):
    result = release(paths=[str(records_file)], settings=settings_for(home))
    layout = StoreLayout.from_settings(settings_for(home))
    assert result.published and result.serving and result.generation == "g0001"
    assert result.counts.sources == len(SAMPLE_RECORDS) == result.run.added
    assert result.counts.chunks == result.counts.vectors > 0
    assert read_routing(layout).serving == "g0001"
    served = open_generation_table(layout, "g0001").to_arrow()
    assert set(served["doc_id"].to_pylist()) == {r["doc_id"] for r in SAMPLE_RECORDS}
    assert Path(result.manifest).exists()


def test_unchanged_rerun_publishes_nothing_and_reembeds_nothing(records_file: Path, home: Path):
    settings = settings_for(home)
    first = release(paths=[str(records_file)], settings=settings)
    vectors_dir = (StoreLayout.from_settings(settings).caches / "vectors").local_path
    before = sorted(p.stat().st_mtime_ns for p in vectors_dir.rglob("*.parquet"))
    again = release(paths=[str(records_file)], settings=settings)
    assert not again.published and again.generation == "g0001"
    assert again.run.unchanged == len(SAMPLE_RECORDS) and again.run.added == again.run.changed == 0
    assert again.counts.revisions == first.counts.revisions  # no new revision
    assert len(list(StoreLayout.from_settings(settings).generations.glob("g*.yaml"))) == 1
    assert sorted(p.stat().st_mtime_ns for p in vectors_dir.rglob("*.parquet")) == before


def test_changed_content_makes_a_new_revision_and_keeps_the_old(tmp_path: Path, home: Path):
    settings = settings_for(home)
    export = write_records(tmp_path / "a.jsonl", SAMPLE_RECORDS)
    release(paths=[str(export)], settings=settings)
    edited = [dict(r) for r in SAMPLE_RECORDS]
    edited[0]["text"] += " Erratum: la séance fut levée à six heures et quart."
    write_records(export, edited)
    result = release(paths=[str(export)], settings=settings)
    assert result.generation == "g0002" and result.run.changed == 1 and result.run.unchanged == 3
    layout = StoreLayout.from_settings(settings)
    info = document_lineage(layout, "g0002", SAMPLE_RECORDS[0]["doc_id"])
    assert len(info["revisions"]) == 2
    assert [r["is_current"] for r in info["revisions"]] == [False, True]
    assert any("Erratum" in c["text"] for c in info["chunks"])
    assert result.counts.revisions == len(SAMPLE_RECORDS) + 1
    # the other documents were carried over, not recomputed
    assert document_lineage(layout, "g0002", SAMPLE_RECORDS[1]["doc_id"])["chunks"] == \
        document_lineage(layout, "g0001", SAMPLE_RECORDS[1]["doc_id"])["chunks"]


def test_a_run_adds_to_the_serving_sources(tmp_path: Path, home: Path):
    settings = settings_for(home)
    release(paths=[str(write_records(tmp_path / "a.jsonl", SAMPLE_RECORDS[:2]))], settings=settings)
    result = release(paths=[str(write_records(tmp_path / "b.jsonl", SAMPLE_RECORDS[2:]))], settings=settings)
    assert result.counts.sources == len(SAMPLE_RECORDS)
    assert result.run.added == len(SAMPLE_RECORDS) - 2


def test_failing_validation_stops_the_release_and_serves_nothing(records_file: Path, home: Path):
    strict = ValidationSettings(extra=[ExpectationConfig(
        table="chunks", expectation="ExpectColumnValuesToBeInSet",
        kwargs={"column": "corpus", "value_set": ["journal_officiel"]})])
    settings = settings_for(home, validation=strict)
    with pytest.raises(ValidationFailed) as info:
        release(paths=[str(records_file)], settings=settings)
    layout = StoreLayout.from_settings(settings)
    assert read_routing(layout).serving is None
    report = Path(info.value.report_path).read_text("utf-8")
    assert "FAILED" in report and "corpus" in report
    assert not list(layout.generations.glob("*.yaml"))


def test_failing_validation_leaves_the_previous_generation_serving(records_file: Path, tmp_path: Path, home: Path):
    release(paths=[str(records_file)], settings=settings_for(home))
    strict = ValidationSettings(extra=[ExpectationConfig(
        table="chunks", expectation="ExpectColumnValuesToNotMatchRegex",
        kwargs={"column": "text", "regex": "Erratum"})])
    edited = [dict(r) for r in SAMPLE_RECORDS]
    edited[1]["text"] += " Erratum."
    with pytest.raises(ValidationFailed):
        release(paths=[str(write_records(tmp_path / "e.jsonl", edited))],
                settings=settings_for(home, validation=strict))
    layout = StoreLayout.from_settings(settings_for(home))
    assert read_routing(layout).serving == "g0001"
    assert open_generation_table(layout, "g0001").count_rows() > 0


def test_staged_generation_is_not_served_until_promoted(records_file: Path, home: Path):
    result = release(paths=[str(records_file)], options=ReleaseOptions(promote=False), settings=settings_for(home))
    assert result.published and not result.serving
    assert read_routing(StoreLayout.from_settings(settings_for(home))).serving is None


def test_duckdb_joins_every_chunk_to_its_revision_and_source(records_file: Path, home: Path):
    release(paths=[str(records_file)], settings=settings_for(home))
    layout = StoreLayout.from_settings(settings_for(home))
    report = chunk_join_report(layout, "g0001")
    assert report["chunks"] > 0 and report["chunks"] == report["with_revision"] == report["with_source"]
    folder = layout.lineage_dir("g0001")
    n = duckdb.sql(f"SELECT count(*) FROM '{folder}/chunks.parquet' c JOIN '{folder}/vectors.parquet' v "
                   "USING (chunk_id)").fetchall()[0][0]
    assert n == report["chunks"]


def test_folder_of_text_files_ingests_with_doc_ids_from_paths(tmp_path: Path, home: Path):
    folder = tmp_path / "fonds"
    (folder / "serie-a").mkdir(parents=True)
    (folder / "serie-a" / "lettre-1.txt").write_text("Monsieur le Préfet,\n\nJ'ai l'honneur de vous informer.", "utf-8")
    (folder / "note.txt").write_text("Note du conservateur sur le classement du fonds.", "utf-8")
    (folder / "vide.txt").write_text("", "utf-8")
    result = release(paths=[str(folder)], options=ReleaseOptions(corpus="fonds-prefecture"), settings=settings_for(home))
    assert result.counts.sources == 2
    assert [q.reason for q in result.quarantined] == ["empty file (0 bytes)"]
    info = document_lineage(StoreLayout.from_settings(settings_for(home)), "g0001", "serie-a/lettre-1")
    assert info["source"]["corpus"] == "fonds-prefecture"
    assert info["pages"][0]["parser"].startswith("plaintext")
