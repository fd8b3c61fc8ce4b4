"""What the store owns for retention: purge records beside the manifest, typed; caches, blobs
and compiled encoders removed by what is still referenced."""
from __future__ import annotations

from datetime import datetime, timezone

from schemas.generation import PurgeRecord
from schemas.indexes import DenseIndex, IndexContract
from tasks.store.blobs import put_blob, remove_blobs
from tasks.store.cache import remove_cached_revisions, remove_encoders
from tasks.store.layout import StoreLayout
from tasks.store.manifests import append_purge, read_purges


def layout_at(tmp_path) -> StoreLayout:
    return StoreLayout(warehouse=tmp_path / "warehouse", manifests=tmp_path / "manifests").ensure()


def test_purge_records_are_appended_beside_the_manifest_and_read_back_typed(tmp_path):
    layout = layout_at(tmp_path)
    assert read_purges(layout, "g0001") == []
    first = PurgeRecord(at=datetime(2026, 1, 2, tzinfo=timezone.utc), sources_removed=["s1"])
    second = PurgeRecord(at=datetime(2026, 1, 3, tzinfo=timezone.utc), sources_removed=["s2", "s3"],
                         indexes=IndexContract(dense=DenseIndex(search="exact", rows=4)))
    append_purge(layout, "g0001", first)
    append_purge(layout, "g0001", second)
    assert read_purges(layout, "g0001") == [first, second]
    assert layout.purges_path("g0001").name == "g0001.purges.yaml"
    assert read_purges(layout, "g0002") == []


def test_purge_records_written_before_the_model_still_read(tmp_path):
    """The earlier writer put `at` as an isoformat string and left `indexes` out when none."""
    layout = layout_at(tmp_path)
    layout.purges_path("g0001").write_text(
        "- at: '2026-01-02T03:04:05.000006+00:00'\n  sources_removed:\n  - s1\n", "utf-8")
    (record,) = read_purges(layout, "g0001")
    assert record.at == datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc)
    assert (record.sources_removed, record.indexes) == (["s1"], None)


def test_cached_revisions_go_unless_kept_and_only_those_named(tmp_path):
    layout = layout_at(tmp_path)
    for rev in ("r1", "r2", "r3"):
        (layout.parsed_dir(rev) / "k.json").write_text("{}")
        layout.vectors_cache("space", "seg", rev).write_bytes(b"x")
    assert remove_cached_revisions(layout, keep={"r1"}, only={"r2"}) == 2  # r2's folder and file
    assert sorted(d.name for d in layout.parsed_root.subfolders()) == ["r1", "r3"]
    assert remove_cached_revisions(layout, keep={"r1"}) == 2
    assert [f.stem for f in layout.vectors_root.files()] == ["r1"]


def test_blobs_and_encoders_go_unless_referenced(tmp_path):
    layout = layout_at(tmp_path)
    kept, _ = put_blob(layout, b"kept")
    gone, _ = put_blob(layout, b"gone")
    other, _ = put_blob(layout, b"other")
    assert remove_blobs(layout, keep={kept}, only={gone}) == 1
    assert sorted(b.name for b in layout.blobs.files()) == sorted([kept, other])
    for space in ("s1", "s2"):
        (layout.encoder_dir(space) / "model.bin").write_bytes(b"x")
    assert remove_encoders(layout, {"s1"}) == 1
    assert [f.name for f in layout.encoders.subfolders()] == ["s1"]
