"""A place in the warehouse — a local folder or an s3:// prefix — behind one small API.

pyarrow's file systems do the I/O for both (no extra dependency), and LanceDB gets the same
root as a URI plus storage options. Every write replaces a whole object: on a local disk through
a temporary file renamed into place, on S3 by one upload that becomes visible only when
complete. Either way a reader sees the old object or the new one, never part of one.
"""
from __future__ import annotations

import functools
import io
import os
from collections.abc import Iterable
from datetime import datetime, timezone
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from schemas.settings import StorageSettings
from tasks.store.atomic import atomic_write_bytes, atomic_write_parquet


@dataclass(frozen=True)
class Location:
    fs: pafs.FileSystem = field(repr=False, compare=False)
    path: str  # as `fs` names it: "/abs/folder" locally, "bucket/key/prefix" on S3
    scheme: str = "file"
    # LanceDB / Lance object-store options for this root (empty locally)
    storage_options: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)

    # naming -----------------------------------------------------------------------------------
    def __truediv__(self, name: str) -> "Location":
        return Location(self.fs, f"{self.path.rstrip('/')}/{name}", self.scheme, self.storage_options)

    def __str__(self) -> str:
        return self.uri

    @property
    def uri(self) -> str:
        return f"s3://{self.path}" if self.scheme == "s3" else self.path

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def stem(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def is_local(self) -> bool:
        return self.scheme == "file"

    @property
    def local_path(self) -> Path:
        if not self.is_local:
            raise ValueError(f"{self.uri} is in object storage, not on the local disk")
        return Path(self.path)

    @property
    def options(self) -> dict[str, str]:
        return dict(self.storage_options)

    # reading ----------------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.fs.get_file_info(self.path).type != pafs.FileType.NotFound

    def is_file(self) -> bool:
        return self.fs.get_file_info(self.path).type == pafs.FileType.File

    def arrived_at(self) -> datetime | None:
        """When the file came to be here: on a local disk the later of its modification and
        status-change times (a move or copy into a folder sets the latter), on S3 the upload
        time. None when the store cannot say."""
        if self.is_local:
            st = os.stat(self.path)
            return datetime.fromtimestamp(max(st.st_mtime, st.st_ctime), timezone.utc)
        mtime = self.fs.get_file_info(self.path).mtime
        return mtime.astimezone(timezone.utc) if mtime is not None else None

    def read_bytes(self) -> bytes:
        try:
            # compression=None: the bytes as stored (pyarrow would inflate a `.gz` by its name)
            with self.fs.open_input_stream(self.path, compression=None) as fh:
                return fh.read()
        except FileNotFoundError:
            raise
        except OSError as exc:  # S3 reports a missing key as a generic OSError
            if not self.exists():
                raise FileNotFoundError(self.uri) from exc
            raise

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def open_binary(self, buffer_size: int = 1 << 16) -> io.BufferedReader:
        """A buffered byte stream (iterable by line), for inputs too large to read whole."""
        return io.BufferedReader(self.fs.open_input_stream(self.path, compression=None), buffer_size)

    def relative_to(self, root: "Location") -> str:
        """The POSIX path of this place inside `root` (a file of a folder, a key below a prefix)."""
        prefix = root.path.rstrip("/") + "/"
        if not self.path.startswith(prefix):
            raise ValueError(f"{self.uri} is not below {root.uri}")
        return self.path[len(prefix):]

    def read_parquet(self, columns: list[str] | None = None, filters=None) -> pa.Table:
        """The table, or only the rows matching pyarrow `filters` (row groups skipped by statistics)."""
        return pq.read_table(self.path, filesystem=self.fs, columns=columns, filters=filters)

    def children(self) -> list["Location"]:
        """Immediate entries (files and folders), by name; none when the folder is absent."""
        infos = self.fs.get_file_info(pafs.FileSelector(self.path, allow_not_found=True))
        return sorted((self._at(i.path) for i in infos), key=lambda loc: loc.name)

    def subfolders(self) -> list["Location"]:
        infos = self.fs.get_file_info(pafs.FileSelector(self.path, allow_not_found=True))
        return sorted((self._at(i.path) for i in infos if i.type == pafs.FileType.Directory),
                      key=lambda loc: loc.name)

    def files(self) -> list["Location"]:
        """Every file below, at any depth."""
        infos = self.fs.get_file_info(pafs.FileSelector(self.path, recursive=True, allow_not_found=True))
        return sorted((self._at(i.path) for i in infos if i.type == pafs.FileType.File),
                      key=lambda loc: loc.path)

    # writing ----------------------------------------------------------------------------------
    def write_bytes(self, data: bytes) -> None:
        if self.is_local:
            atomic_write_bytes(self.local_path, data)
            return
        with self.fs.open_output_stream(self.path) as fh:
            fh.write(data)

    def write_chunks(self, chunks: Iterable[bytes]) -> int:
        """Write an object too large to hold whole, piece by piece; still all or nothing (a
        temporary file renamed into place locally, one multipart upload on S3). Returns bytes."""
        written = 0
        if self.is_local:
            path = self.local_path
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            try:
                with open(tmp, "wb") as fh:
                    for piece in chunks:
                        fh.write(piece)
                        written += len(piece)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            return written
        with self.fs.open_output_stream(self.path) as fh:
            for piece in chunks:
                fh.write(piece)
                written += len(piece)
        return written

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode("utf-8"))

    def write_parquet(self, table: pa.Table) -> None:
        if self.is_local:
            atomic_write_parquet(self.local_path, table)
            return
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        self.write_bytes(buffer.getvalue())

    def mkdir(self) -> None:
        """Local folders only; object storage has no folders to create."""
        if self.is_local:
            self.local_path.mkdir(parents=True, exist_ok=True)

    def unlink(self) -> None:
        self.fs.delete_file(self.path)

    def remove_tree(self) -> None:
        """The folder and everything below it; nothing happens when it is absent."""
        if self.fs.get_file_info(self.path).type == pafs.FileType.NotFound:
            return
        self.fs.delete_dir(self.path)

    def _at(self, path: str) -> "Location":
        return Location(self.fs, path, self.scheme, self.storage_options)


def open_location(root: str | Path, storage: StorageSettings | None = None) -> Location:
    """A local path or file:// URI, or an s3://bucket/prefix URI, as a Location."""
    text = str(root)
    if text.startswith("s3://"):
        return _s3_location(text, storage or StorageSettings())
    if text.startswith("file://"):
        text = unquote(urlparse(text).path)
    return Location(_local_fs(), str(Path(text).resolve()), "file")


@functools.cache
def _local_fs() -> pafs.LocalFileSystem:
    return pafs.LocalFileSystem()


def _s3_location(uri: str, storage: StorageSettings) -> Location:
    parsed = urlparse(uri)
    if not parsed.netloc:
        raise ValueError(f"{uri!r} names no bucket (expected s3://bucket/prefix)")
    path = f"{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/")
    return Location(_s3_fs(storage), path, "s3", tuple(sorted(lance_storage_options(storage).items())))


def _endpoint(storage: StorageSettings) -> tuple[str | None, str]:
    """(host[:port] or None, scheme) of the configured endpoint."""
    if not storage.endpoint_url:
        return None, "https"
    parsed = urlparse(storage.endpoint_url if "://" in storage.endpoint_url
                      else f"https://{storage.endpoint_url}")
    return parsed.netloc, parsed.scheme or "https"


def _allow_http(storage: StorageSettings) -> bool:
    if storage.allow_http is not None:
        return storage.allow_http
    return _endpoint(storage)[1] == "http"


def _s3_fs(storage: StorageSettings) -> pafs.S3FileSystem:
    host, scheme = _endpoint(storage)
    if scheme == "http" and not _allow_http(storage):
        raise ValueError(f"endpoint {storage.endpoint_url} is plain http; set "
                         "MABILLON_STORAGE__ALLOW_HTTP=true (or AWS_ALLOW_HTTP) to allow it")
    return _cached_s3_fs(host, scheme, storage.region, storage.access_key_id,
                         storage.secret_access_key.get_secret_value() if storage.secret_access_key else None)


@functools.cache
def _cached_s3_fs(host: str | None, scheme: str, region: str, key: str | None,
                  secret: str | None) -> pafs.S3FileSystem:
    kwargs: dict = {"region": region, "scheme": scheme}
    if host:
        kwargs["endpoint_override"] = host
    if key and secret:
        kwargs.update(access_key=key, secret_key=secret)
    return pafs.S3FileSystem(**kwargs)


def lance_storage_options(storage: StorageSettings) -> dict[str, str]:
    """The same endpoint and credentials, spelled as Lance's object store expects them."""
    options = {"aws_region": storage.region}
    if storage.endpoint_url:
        host, scheme = _endpoint(storage)
        options["aws_endpoint"] = f"{scheme}://{host}"
    if _allow_http(storage):
        options["allow_http"] = "true"
    if storage.access_key_id and storage.secret_access_key:
        options["aws_access_key_id"] = storage.access_key_id
        options["aws_secret_access_key"] = storage.secret_access_key.get_secret_value()
    return options
