"""Deletion reaches every answer at once and every copy on disk; rollback cannot resurrect."""
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from flows.operate import DeleteParams, RollbackParams, delete, gc, rollback
from flows.release import release
from schemas.indexes import IndexSettings
from schemas.retrieval import Principal
from schemas.settings import RetentionSettings
from tasks.query.retriever import Retriever
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table
from tasks.store.routing import read_routing
from tasks.store.tombstones import add_tombstones, read_tombstones
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records

PUBLIC = Principal(principal_id="default", tenant="default", groups=["public"])
MARKER = "Zéphyrin Quatremère-Dulac"  # appears only in the document to be deleted
SECRET = {"doc_id": "gaulois-1887-03-05", "corpus": "le_gaulois", "date": "1887-03-05",
          "text": f"Échos. On annonce que M. {MARKER}, conseiller de préfecture, quitte Alençon pour "
                  "Rouen; ses amis regrettent un homme d'esprit et un joueur de whist redoutable."}


def files_containing(root: Path, needle: str) -> list[Path]:
    data = needle.encode("utf-8")
    return [p for p in root.rglob("*") if p.is_file() and data in p.read_bytes()]


def _index_dirs(home: Path) -> set[str]:
    folder = home / "warehouse" / "lance" / "chunks.lance" / "_indices"
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def _indexes_of_tagged(layout) -> set[str]:
    from tasks.store.lance_store import open_generation_table, tagged_generations

    return {i.index_uuid for g in tagged_generations(layout)
            for i in open_generation_table(layout, g).list_indices()}


def hits(settings, query: str) -> list[str]:
    r = Retriever.open(settings, PUBLIC)
    return [h.doc_id for h in r.warm_start(query, k=10)] + [h.doc_id for h in r.substring_chunks(MARKER)]


# Each test also runs with the ANN index forced on: purge, rollback and gc reach the indexes.
@pytest.fixture(params=["exact", "ann"])
def index(request) -> dict:
    return {"index": IndexSettings(ann_min_rows=0, exact_below_allowed=0)} if request.param == "ann" else {}


def _published(index: dict):
    def build(home: Path, inputs: Path) -> None:
        release(paths=[str(write_records(inputs / "a.jsonl", [*SAMPLE_RECORDS, SECRET]))],
                settings=settings_for(home, **index))
    return build


@pytest.fixture
def published(request, home_templates, home: Path, index):
    """The sample and SECRET published as g0001 (a copy of one session-wide build per index)."""
    key = f"deletion-published-{request.node.callspec.params['index']}"
    return settings_for(home_templates.copy(key, _published(index), home), **index)


def test_delete_masks_at_once_publishes_without_it_and_purges_every_copy(published, home: Path):
    settings = published
    assert SECRET["doc_id"] in hits(settings, MARKER)
    assert files_containing(home, MARKER)
    result = delete(DeleteParams(doc_ids=[SECRET["doc_id"]], reason="droit à l'oubli"), settings=settings)
    assert SECRET["doc_id"] not in hits(settings, MARKER)
    assert result.generation == "g0002" and result.masked_after_s < result.published_after_s
    layout = StoreLayout.from_settings(settings)
    assert SECRET["doc_id"] not in read_lineage_table(layout, "g0002", "sources")["doc_id"].to_pylist()
    # no LanceDB version, lineage snapshot, cache, blob or record of any retained generation keeps it
    assert files_containing(home, MARKER) == []
    assert SECRET["doc_id"] not in read_lineage_table(layout, "g0001", "sources")["doc_id"].to_pylist()
    # the indexes of the rewritten generation were rebuilt over its remaining rows, with the
    # manifest's parameters, and the old ones are gone from disk
    from tasks.index.postings import PostingsIndex
    from tasks.store.manifests import read_manifest

    manifest = read_manifest(layout, "g0001")
    lexical = PostingsIndex.open(layout.index_dir("g0001") / manifest.indexes.lexical.path)
    assert lexical.rows == read_lineage_table(layout, "g0001", "chunks").num_rows
    purges = yaml.safe_load((layout.generations / "g0001.purges.yaml").read_text("utf-8"))
    assert purges[-1]["indexes"]["dense"]["search"] == manifest.indexes.dense.search
    assert _index_dirs(home) <= _indexes_of_tagged(layout)  # old versions' indexes pruned
    # what the operator reads back: the purge is counted, and the counts are the data's now
    from tasks.ops.generations import generation_statuses

    status = next(s for s in generation_statuses(layout) if s.generation == "g0001")
    assert status.purged_sources == 1 and status.counts_at_publish == manifest.counts
    assert status.counts.chunks == read_lineage_table(layout, "g0001", "chunks").num_rows


def test_rollback_to_a_generation_made_before_the_deletion_does_not_bring_it_back(published):
    settings = published
    delete(DeleteParams(doc_ids=[SECRET["doc_id"]]), settings=settings)
    rollback(RollbackParams(to="g0001"), settings=settings)
    assert SECRET["doc_id"] not in hits(settings, MARKER)


def test_reingesting_a_deleted_document_is_refused(published, tmp_path: Path):
    settings = published
    delete(DeleteParams(doc_ids=[SECRET["doc_id"]]), settings=settings)
    again = release(paths=[str(write_records(tmp_path / "again.jsonl", [SECRET]))], settings=settings)
    assert not again.published
    assert "was deleted" in again.quarantined[0].reason


def test_with_a_retention_window_gc_purges_once_it_has_passed(published, home: Path, index, monkeypatch):
    # An hour's window, and the clock moved past it: a loaded machine cannot outrun it.
    settings = settings_for(home, retention=RetentionSettings(deletion_window_s=3600), **index)
    result = delete(DeleteParams(doc_ids=[SECRET["doc_id"]]), settings=settings)
    assert result.purged_after_s is None
    assert SECRET["doc_id"] not in hits(settings, MARKER)  # masked at once
    assert files_containing(home, MARKER)  # but still on disk inside the window
    report = gc(settings=settings)
    assert report.purge is None  # window not over yet
    import tasks.ops.retention as retention

    class Later(retention.datetime):
        @classmethod
        def now(cls, tz=None):
            return super().now(tz) + timedelta(hours=2)

    monkeypatch.setattr(retention, "datetime", Later)
    report = gc(settings=settings)
    assert report.purge and report.purge.generations_rewritten == ["g0001"]
    assert files_containing(home, MARKER) == []


def _one_generation_per_record(index: dict):
    def build(home: Path, inputs: Path) -> None:
        for i, rec in enumerate(SAMPLE_RECORDS):
            release(paths=[str(write_records(inputs / f"{i}.jsonl", [rec]))], settings=settings_for(home, **index))
    return build


def test_gc_retires_generations_beyond_retention_but_keeps_serving_and_pinned(request, home_templates,
                                                                            home: Path, index):
    from flows.operate import pin

    key = f"deletion-four-generations-{request.node.callspec.params['index']}"
    home_templates.copy(key, _one_generation_per_record(index), home)
    settings = settings_for(home, retention=RetentionSettings(keep_last=1), **index)
    layout = StoreLayout.from_settings(settings)
    pin(layout, "g0002")
    report = gc(settings=settings)
    assert report.kept == ["g0002", "g0004"] and report.retired == ["g0001", "g0003"]
    assert not layout.lineage_dir("g0001").exists()
    from tasks.store.lance_store import tagged_generations

    assert sorted(tagged_generations(layout)) == ["g0002", "g0004"]
    assert sorted(p.name for p in (home / "warehouse" / "indexes").iterdir()) == ["g0002", "g0004"]
    assert _index_dirs(home) <= _indexes_of_tagged(layout)  # no index files of retired versions


@pytest.mark.parametrize("index", ["exact"], indirect=True)
def test_a_release_leaves_out_a_deleted_document_whose_new_generation_is_still_to_come(published, home: Path,
                                                                                       tmp_path: Path):
    """A delete that found the release slot held leaves its tombstone pending (masked, still in
    the serving generation): the next release stages without it, where its reconcile used to
    refuse the generation, and settles it (purged: no retention window)."""
    settings = published
    layout = StoreLayout.from_settings(settings)
    add_tombstones(layout, [SECRET["doc_id"]], "archivist", "droit à l'oubli")
    more = {"doc_id": "temps-1887-03-09", "corpus": "le_temps", "date": "1887-03-09",
            "text": "Le Temps. La discussion sur les blés reprend; M. Méline répond aux députés de la Brie."}
    result = release(paths=[str(write_records(tmp_path / "more.jsonl", [more]))], settings=settings)
    assert result.serving and result.generation == read_routing(layout).serving == "g0002"
    assert SECRET["doc_id"] not in read_lineage_table(layout, "g0002", "sources")["doc_id"].to_pylist()
    assert not read_tombstones(layout).pending
    assert SECRET["doc_id"] not in hits(settings, MARKER)
    assert files_containing(home, MARKER) == []
