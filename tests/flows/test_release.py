"""The release flow end to end on small exports: real LanceDB, real Prefect, real model.

The tests taking `runner` run on both runners: a first ingest, an unchanged rerun and the run's
report (its OCR pages fanned out) are where the runner matters. The rest is the same flow's logic
on either runner, and runs locally. (A worker killed mid-OCR is tests/flows/test_crash_safety.py.)"""
from pathlib import Path

import duckdb
import pytest

from flows.release import ReleaseOptions, release
from schemas.generation import ValidationFailed
from schemas.settings import ExpectationConfig, ValidationSettings
from tasks.store.lance_store import open_generation_table
from tasks.store.layout import StoreLayout
from tasks.store.lineage_query import chunk_join_report, document_lineage
from tasks.store.lineage_store import read_lineage_table
from tasks.store.manifests import read_manifest
from tasks.store.routing import read_routing
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records
from tests.fixtures import make_samples as fx

# one xdist group with the other modules that take the session's Dask cluster (tests/conftest.py
# GROUP_STACKS): one cluster per run, finished when the group ends
pytestmark = pytest.mark.xdist_group("dask")


def test_first_ingest_publishes_and_serves(records_file: Path, home: Path, runner: dict):
    result = release(paths=[str(records_file)], settings=settings_for(home, **runner))
    layout = StoreLayout.from_settings(settings_for(home, **runner))
    assert result.published and result.serving and result.generation == "g0001"
    assert result.counts.sources == len(SAMPLE_RECORDS) == result.run.added
    assert result.counts.chunks == result.counts.vectors > 0
    assert read_routing(layout).serving == "g0001"
    served = open_generation_table(layout, "g0001").to_arrow()
    assert set(served["doc_id"].to_pylist()) == {r["doc_id"] for r in SAMPLE_RECORDS}
    assert Path(result.manifest).exists()


def test_unchanged_rerun_publishes_nothing_and_reembeds_nothing(records_file: Path, home: Path, runner: dict):
    settings = settings_for(home, **runner)
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


def test_a_truncated_pdf_and_a_giant_blank_page_are_quarantined_and_the_rest_published(
        tmp_path: Path, home: Path):
    folder = tmp_path / "arrivage"
    folder.mkdir()
    (folder / "tronque.pdf").write_bytes(fx.truncated_pdf())
    (folder / "geante.pdf").write_bytes(fx.giant_blank_pdf())
    (folder / "lettre.txt").write_text("Monsieur le Préfet, j'ai l'honneur de vous informer.", "utf-8")
    result = release(paths=[str(folder)], settings=settings_for(home))
    reasons = {Path(q.uri).name: q.reason for q in result.quarantined}
    assert reasons["tronque.pdf"].startswith("no text found on any of its 3 page(s)")
    assert reasons["geante.pdf"] == "PDF page 1 is 200 × 200 in, over the limit of 100 in a side"
    assert result.published and result.serving and result.counts.sources == 1
    assert result.run.quarantined == 2 and result.run.added == 1


def test_the_run_reports_its_runner_workers_ocr_pages_and_stage_seconds(tmp_path: Path, home: Path, runner: dict):
    folder = tmp_path / "scans"
    folder.mkdir()
    (folder / "registre.pdf").write_bytes(fx.scanned_pdf_of(["registre-1793", "affiche-1848", "etat-civil-1854"]))
    (folder / "acte.png").write_bytes(fx.straight_scan("PNG"))
    result = release(paths=[str(folder)], settings=settings_for(home, **runner))
    run = result.run
    assert run.runner == runner["runner"] and run.workers == 2 and run.ocr_pages == 4
    assert list(run.stage_seconds) == ["acquire", "inspect", "plan", "parse", "chunk", "embed", "stage",
                                       "validate", "reconcile", "publish"]
    assert run.stage_seconds["parse"] > 0
    # the three-page scan was parsed page by page and put back in order
    pages = read_lineage_table(StoreLayout.from_settings(settings_for(home, **runner)), "g0001", "pages")
    scan = sorted((p for p in pages.to_pylist() if p["page_id"].startswith(result_revision(pages, 3))),
                  key=lambda p: p["page_no"])
    assert [p["page_no"] for p in scan] == [1, 2, 3]
    assert ["Vaux-le-Moutier" in scan[0]["raw_text"], "Tourouvre" in scan[1]["raw_text"],
            "Rânes" in scan[2]["raw_text"]] == [True, True, True]
    # the manifest records how the generation was made
    manifest = read_manifest(StoreLayout.from_settings(settings_for(home, **runner)), "g0001")
    assert manifest.run.runner == runner["runner"] and manifest.run.ocr_pages == 4
    # a rerun resumes from the caches: nothing read by OCR again
    again = release(paths=[str(folder)], settings=settings_for(home, **runner))
    assert again.run.ocr_pages == 0 and not again.published


def result_revision(pages, n_pages: int) -> str:
    """The revision id of the only document with `n_pages` pages."""
    counts: dict[str, int] = {}
    for rev in pages["revision_id"].to_pylist():
        counts[rev] = counts.get(rev, 0) + 1
    [rev] = [r for r, n in counts.items() if n == n_pages]
    return rev
