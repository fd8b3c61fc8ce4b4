"""Validity intervals from sidecar rows and record fields, carried to every served chunk; absent
means always valid, and generations published before intervals existed keep serving."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import lancedb
import pyarrow.parquet as pq

from flows.release import release
from schemas.generation import Quarantined
from tasks.access.principals import default_principal
from tasks.ingest.acquire import AccessDefaults, iter_inputs
from tasks.query.retriever import Retriever
from tasks.query.searchable import drop_caches
from tasks.store.integrity import record_digests
from tasks.store.lance_store import open_generation_table
from tasks.store.layout import CHUNKS_TABLE, StoreLayout
from tasks.store.lineage_store import read_lineage_table
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records

DEFAULTS = AccessDefaults(corpus="fonds", tenant="default", groups=("public",))
UTC = timezone.utc


def _walk(path: Path):
    quarantined: list[Quarantined] = []
    inputs = {p.source.doc_id: p.source for p in iter_inputs([path], DEFAULTS, quarantined)}
    return inputs, quarantined


def test_sidecar_rows_carry_an_embargo_and_a_withdrawal_and_a_bad_bound_refuses_its_file(tmp_path):
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (tmp_path / name).write_text(f"Texte {name}.", "utf-8")
    (tmp_path / "sidecar.json").write_text(json.dumps([
        {"file": "a.txt", "valid_from": "2031-05-01"},
        {"file": "b.txt", "valid_to": "2026-01-01T12:00:00+01:00"},
        {"file": "c.txt", "valid_from": "le 3 mai"},
        {"file": "d.txt", "valid_from": "2030-01-01", "valid_to": "2029-01-01"}]), "utf-8")
    inputs, quarantined = _walk(tmp_path)
    assert inputs["a"].valid_from == datetime(2031, 5, 1, tzinfo=UTC) and inputs["a"].valid_to is None
    assert inputs["b"].valid_to == datetime(2026, 1, 1, 11, tzinfo=UTC)
    reasons = {Path(q.uri).name: q.reason for q in quarantined}
    assert set(reasons) == {"c.txt", "d.txt"}
    assert "not an ISO 8601 date or time" in reasons["c.txt"]
    assert "never be visible" in reasons["d.txt"]


def test_csv_sidecars_and_record_fields_carry_intervals_too(tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "a.txt").write_text("Texte.", "utf-8")
    (tmp_path / "f" / "sidecar.csv").write_text("file,valid_to\na.txt,2030-02-01\n", "utf-8")
    assert _walk(tmp_path / "f")[0]["a"].valid_to == datetime(2030, 2, 1, tzinfo=UTC)
    export = write_records(tmp_path / "x.jsonl", [
        {"doc_id": "r1", "corpus": "c", "text": "Un.", "valid_from": "2030-01-01T00:00:00Z"},
        {"doc_id": "r2", "corpus": "c", "text": "Deux.", "valid_to": "jamais"}])
    inputs, quarantined = _walk(export)
    assert inputs["r1"].valid_from == datetime(2030, 1, 1, tzinfo=UTC)
    assert [q.line for q in quarantined] == [2] and "valid_to 'jamais'" in quarantined[0].reason


def _docs(retriever, query="débat sur les blés jeudi Brie") -> set[str]:
    return {h.doc_id for h in retriever.bm25_docs(query, 20)}


def test_an_embargo_ends_by_itself_with_no_new_generation(tmp_path, home, monkeypatch):
    settings = settings_for(home)
    ends = datetime(2031, 5, 1, 8, tzinfo=UTC)
    records = [dict(r) for r in SAMPLE_RECORDS]
    records[1]["valid_from"] = "2031-05-01T10:00:00+02:00"
    records[2]["valid_to"] = "2020-01-01"
    release(paths=[str(write_records(tmp_path / "x.jsonl", records))], settings=settings)
    layout = StoreLayout.from_settings(settings)
    chunks = read_lineage_table(layout, "g0001", "chunks", ["doc_id", "valid_from", "valid_to"]).to_pylist()
    assert {c["doc_id"]: c["valid_from"] for c in chunks}["gaulois-1887-03-03"] == ends

    clock = {"now": ends - timedelta(microseconds=1)}  # the query side's clock, moved by the test
    monkeypatch.setattr("tasks.access.validity.now_utc", lambda: clock["now"])
    retriever = Retriever.open(settings, default_principal(settings))
    before = _docs(retriever)
    assert "gaulois-1887-03-03" not in before and "intransigeant-1887-03-04" not in before
    assert "jo-1887-03-02" in before
    assert all(h.doc_id != "gaulois-1887-03-03" for h in retriever.dense_docs("débat sur les blés", 20))
    clock["now"] = ends
    after = _docs(retriever)  # the same retriever, the same generation, the moment it ends
    assert after == before | {"gaulois-1887-03-03"}
    assert any(h.doc_id == "gaulois-1887-03-03" for h in retriever.dense_docs("débat sur les blés", 20))
    assert len(list(layout.generations.glob("g*.yaml"))) == 1
    # a question naming a past time sees the withdrawn article as it was then
    then = Retriever.open(settings, default_principal(settings), as_of="2019-12-31")
    assert "intransigeant-1887-03-04" in _docs(then) and "gaulois-1887-03-03" not in _docs(then)


def test_a_sidecar_only_change_reaches_the_served_chunks_without_reembedding(tmp_path, home):
    settings = settings_for(home)
    folder = tmp_path / "fonds"
    folder.mkdir()
    for r in SAMPLE_RECORDS:
        (folder / f"{r['doc_id']}.txt").write_text(r["text"], "utf-8")
    release(paths=[str(folder)], settings=settings)
    layout = StoreLayout.from_settings(settings)
    vectors = {p: p.stat().st_mtime_ns for p in (layout.caches / "vectors").local_path.rglob("*.parquet")}
    assert "jo-1887-03-02" in _docs(Retriever.open(settings, default_principal(settings)))

    (folder / "sidecar.json").write_text(json.dumps([{"file": "jo-1887-03-02.txt",
                                                      "valid_to": "2001-01-01"}]), "utf-8")
    again = release(paths=[str(folder)], settings=settings)
    assert again.published and again.generation == "g0002" and again.run.changed == 1
    served = open_generation_table(layout, "g0002").to_arrow().to_pylist()
    withdrawn = [c for c in served if c["doc_id"] == "jo-1887-03-02"]
    assert withdrawn and all(c["valid_to"] == datetime(2001, 1, 1, tzinfo=UTC) for c in withdrawn)
    assert "jo-1887-03-02" not in _docs(Retriever.open(settings, default_principal(settings)))
    # same bytes: the vectors came from the cache
    assert {p: p.stat().st_mtime_ns for p in vectors} == vectors


def _strip_validity(layout: StoreLayout, generation: str) -> None:
    """Make a generation look as one published before intervals existed: no such columns."""
    drop = ["valid_from", "valid_to", "arrived_at"]
    for name in ("chunks", "revisions"):
        path = layout.lineage_dir(generation).local_path / f"{name}.parquet"
        table = pq.read_table(path)
        pq.write_table(table.drop_columns([c for c in drop if c in table.schema.names]), path)
    db = lancedb.connect(layout.lance.uri)
    table = open_generation_table(layout, generation).to_arrow().drop_columns(["valid_from", "valid_to"])
    new = db.create_table(CHUNKS_TABLE, table, mode="overwrite")
    new.tags.update(generation, new.version)
    record_digests(layout, generation)  # rewritten on purpose: what it serves now is what was written
    drop_caches(generation)


def test_a_generation_published_before_intervals_still_serves_and_is_built_upon(tmp_path, home):
    settings = settings_for(home)
    release(paths=[str(write_records(tmp_path / "a.jsonl", SAMPLE_RECORDS[:3]))], settings=settings)
    layout = StoreLayout.from_settings(settings)
    _strip_validity(layout, "g0001")
    assert "valid_from" not in open_generation_table(layout, "g0001").schema.names
    old = Retriever.open(settings, default_principal(settings))
    assert {"jo-1887-03-02", "gaulois-1887-03-03"} <= _docs(old)
    assert old.dense_docs("débat sur les blés", 5)  # the dense filter has no validity clause to fail on

    more = [{**SAMPLE_RECORDS[3], "valid_from": "2099-01-01"}]
    result = release(paths=[str(write_records(tmp_path / "b.jsonl", more))], settings=settings)
    assert result.published and result.counts.sources == 4
    new = Retriever.open(settings, default_principal(settings))
    assert new.generation == "g0002"
    assert {"jo-1887-03-02", "gaulois-1887-03-03"} <= _docs(new)
    assert "jo-1887-03-10" not in _docs(new, "sucres raffineries Méline")
    assert not new.dense_docs("sucres raffineries du Nord", 10) or all(
        h.doc_id != "jo-1887-03-10" for h in new.dense_docs("sucres raffineries du Nord", 10))
