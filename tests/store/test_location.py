"""One Location API over a local folder and an s3:// prefix (a real S3 server on loopback)."""
from __future__ import annotations

import pyarrow as pa
import pytest
from pydantic import ValidationError

from schemas.settings import MabillonSettings, StorageSettings
from tasks.store.location import Location, lance_storage_options, open_location


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path) -> Location:
    if request.param == "local":
        return open_location(tmp_path / "warehouse")
    bucket = request.getfixturevalue("s3_bucket")
    return open_location(bucket.uri("warehouse"), bucket.storage)


def test_bytes_written_are_read_back_and_listed(root: Location):
    (root / "blobs" / "ab" / "abc").write_bytes(b"\x00bytes")
    (root / "blobs" / "cd" / "cde").write_text("texte accentué")
    assert (root / "blobs" / "ab" / "abc").read_bytes() == b"\x00bytes"
    assert (root / "blobs" / "cd" / "cde").read_text() == "texte accentué"
    assert [loc.name for loc in (root / "blobs").files()] == ["abc", "cde"]
    assert [loc.name for loc in (root / "blobs").subfolders()] == ["ab", "cd"]
    assert (root / "blobs" / "ab" / "abc").is_file() and not (root / "blobs").is_file()


def test_missing_things_are_absent_not_errors(root: Location):
    missing = root / "nowhere"
    assert not missing.exists()
    assert missing.files() == [] and missing.subfolders() == []
    missing.remove_tree()  # nothing to do, no error
    with pytest.raises(FileNotFoundError):
        (missing / "file").read_bytes()


def test_parquet_round_trip_and_overwrite(root: Location):
    target = root / "lineage" / "g0001" / "sources.parquet"
    target.write_parquet(pa.table({"doc_id": ["a", "b"]}))
    target.write_parquet(pa.table({"doc_id": ["c"]}))
    assert target.read_parquet()["doc_id"].to_pylist() == ["c"]
    assert target.read_parquet(columns=["doc_id"]).num_rows == 1


def test_remove_tree_removes_everything_below(root: Location):
    for name in ("a", "b/c", "b/d/e"):
        (root / "indexes" / "g0001" / name).write_bytes(b"x")
    (root / "indexes" / "g0002" / "keep").write_bytes(b"y")
    (root / "indexes" / "g0001").remove_tree()
    assert [loc.name for loc in (root / "indexes").files()] == ["keep"]
    assert not (root / "indexes" / "g0001").exists()


def test_uris_name_the_store(root: Location, tmp_path):
    blob = root / "blobs" / "x"
    if root.is_local:
        assert blob.uri == str(tmp_path / "warehouse" / "blobs" / "x") and blob.local_path.name == "x"
    else:
        assert blob.uri.startswith("s3://mabillon-") and blob.uri.endswith("/warehouse/blobs/x")
        with pytest.raises(ValueError, match="object storage"):
            blob.local_path


def test_lance_options_carry_the_endpoint_and_credentials():
    storage = StorageSettings(endpoint_url="http://minio:9000", access_key_id="k", secret_access_key="s")
    assert lance_storage_options(storage) == {
        "aws_region": "us-east-1", "aws_endpoint": "http://minio:9000", "allow_http": "true",
        "aws_access_key_id": "k", "aws_secret_access_key": "s"}
    assert "allow_http" not in lance_storage_options(StorageSettings(endpoint_url="https://s3.example.org"))


def test_plain_http_endpoint_is_refused_when_http_is_disallowed():
    storage = StorageSettings(endpoint_url="http://minio:9000", allow_http=False)
    with pytest.raises(ValueError, match="ALLOW_HTTP"):
        open_location("s3://bucket/warehouse", storage)


def test_storage_settings_fall_back_to_the_standard_aws_variables(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://minio:9000")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-aws")
    monkeypatch.setenv("MABILLON_STORAGE__ACCESS_KEY_ID", "from-mabillon")
    settings = MabillonSettings()
    assert settings.storage.endpoint_url == "http://minio:9000"
    assert settings.storage.access_key_id == "from-mabillon"


def test_warehouse_may_be_s3_but_manifests_must_be_a_folder(tmp_path):
    assert MabillonSettings(home=tmp_path, warehouse_dir="s3://b/w/").warehouse == "s3://b/w"
    assert MabillonSettings(home=tmp_path, warehouse_dir=tmp_path / "w").warehouse == str(tmp_path / "w")
    with pytest.raises(ValidationError, match="atomic rename"):
        MabillonSettings(home=tmp_path, manifests_dir="s3://b/m")
    with pytest.raises(ValidationError, match="s3://"):
        MabillonSettings(home=tmp_path, warehouse_dir="http://example.org/w")


def test_an_s3_uri_without_a_bucket_is_refused():
    with pytest.raises(ValueError, match="no bucket"):
        open_location("s3:///warehouse")


def test_file_uris_are_decoded_to_local_paths(tmp_path):
    folder = tmp_path / "fonds Dupont"
    assert open_location(folder.as_uri()).local_path == folder


def test_paths_below_a_root_are_named_relative_to_it_and_streams_read_by_line(root: Location):
    export = root / "inbox" / "serie-a" / "export.jsonl"
    export.write_bytes(b'{"a": 1}\n{"b": 2}\n')
    assert export.relative_to(root / "inbox") == "serie-a/export.jsonl"
    with pytest.raises(ValueError, match="not below"):
        export.relative_to(root / "elsewhere")
    with export.open_binary() as fh:
        assert list(fh) == [b'{"a": 1}\n', b'{"b": 2}\n']
