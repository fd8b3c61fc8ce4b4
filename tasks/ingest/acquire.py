"""Acquire: name the inputs, store their bytes content-addressed, record source → revision.

Inputs are JSONL record exports (one document a line) and files or folders of files, given as
local paths, file:// URIs or s3:// URIs (an object, or a prefix read like a folder). Local and
object storage share one walk over `Location`; bytes are read only when a revision is stored.
A bad record line is quarantined with its line number; the other lines go on, and so does the
batch when an input is missing or its storage cannot be reached.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import date as date_type
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, ConfigDict, Field

from schemas.generation import Quarantined, Screened
from schemas.lineage import RECORD_MEDIA_TYPE, Revision, SourceInput
from schemas.settings import InspectionLimits, StorageSettings
from schemas.validity import InvalidInstant, parse_interval
from tasks.ingest.identifiers import doc_id_problem
from tasks.ingest.package.inputs import Access, is_mets_file, lone_mets_inputs, package_inputs
from tasks.ingest.sidecar import SidecarEntry, read_sidecars
from tasks.store.blobs import put_blob
from tasks.store.layout import StoreLayout
from tasks.store.location import Location, open_location
from schemas.generation import TombstoneList
from tasks.progress import StageProgress
from tasks.task_wrapper import as_task

DATE_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}$")
IGNORED_NAMES = {"sidecar.json", "sidecar.csv", ".DS_Store", "Thumbs.db"}
# What uploaders and browsers name a file while it is still being written; renamed when done.
PARTIAL_SUFFIXES = (".part", ".partial", ".crdownload", ".filepart", ".tmp", ".uploading")
URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


@dataclass(frozen=True)
class AccessDefaults:
    corpus: str | None
    tenant: str
    groups: tuple[str, ...]


@dataclass
class PendingInput:
    """A named input whose bytes are produced lazily, so a large batch is never all in memory."""

    source: SourceInput
    location: Location | None = None
    data: bytes | None = None

    def read(self) -> bytes:
        return self.data if self.data is not None else self.location.read_bytes()  # type: ignore[union-attr]


def revision_id_for(source_id: str, digest: str) -> str:
    return "r" + hashlib.sha256(f"{source_id}\0{digest}".encode()).hexdigest()[:20]


def canonical_record_bytes(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def parse_record_line(line: str, defaults: AccessDefaults) -> tuple[SourceInput, bytes]:
    """Validate one export line; raises ValueError with a readable reason."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:  # "[[[[…" a hundred thousand deep: refused, not a crash of the batch
        raise ValueError("JSON nested too deeply to be a record") from None
    if not isinstance(record, dict):
        raise ValueError("a record must be a JSON object")
    doc_id = record.get("doc_id")
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise ValueError("missing or empty doc_id")
    if problem := doc_id_problem(doc_id):
        raise ValueError(problem)
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{doc_id}: missing or empty text")
    corpus = record.get("corpus") or defaults.corpus
    if not isinstance(corpus, str) or not corpus:
        raise ValueError(f"{doc_id}: missing corpus (give one in the record or with --corpus)")
    date = record.get("date")
    if date is not None:
        if not isinstance(date, str) or not DATE_PATTERN.match(date):
            raise ValueError(f"{doc_id}: date {date!r} is not YYYY-MM-DD")
        try:
            date_type.fromisoformat(date)
        except ValueError:
            raise ValueError(f"{doc_id}: date {date!r} is not a calendar date") from None
    tenant = record.get("tenant", defaults.tenant)
    groups = record.get("groups", list(defaults.groups))
    if not isinstance(tenant, str) or not tenant:
        raise ValueError(f"{doc_id}: tenant must be a non-empty string")
    if not isinstance(groups, list) or not groups or not all(isinstance(g, str) and g for g in groups):
        raise ValueError(f"{doc_id}: groups must be a non-empty list of strings")
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValueError(f"{doc_id}: metadata must be an object")
    title = record.get("title")
    if title is not None and not isinstance(title, str):
        raise ValueError(f"{doc_id}: title must be a string")
    try:
        data = canonical_record_bytes(record)
    except UnicodeEncodeError:  # a lone surrogate (\\ud800) decodes from JSON but is not text
        raise ValueError(f"{doc_id}: the record holds an unpaired surrogate, not Unicode text") from None
    try:
        valid_from, valid_to = parse_interval(record.get("valid_from"), record.get("valid_to"))
    except InvalidInstant as exc:
        raise ValueError(f"{doc_id}: {exc}") from None
    source = SourceInput(
        source_id=doc_id, uri=f"record:{doc_id}", doc_id=doc_id, corpus=corpus, date=date,
        title=title, tenant=tenant, groups=sorted(set(groups)), metadata=metadata,
        declared_media_type=RECORD_MEDIA_TYPE, valid_from=valid_from, valid_to=valid_to,
    )
    return source, data


def open_source(source: str | Path, storage: StorageSettings | None = None) -> Location:
    """A command-line input as a Location; raises ValueError for a scheme acquire does not read."""
    text = str(source)
    match = URI_SCHEME.match(text)
    scheme = match.group(1).lower() if match else None
    if scheme == "file":
        parsed = urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"file:// URI names host {parsed.netloc!r}; only local files are read")
        text = unquote(parsed.path)
    elif scheme == "s3":
        text = "s3://" + text[match.end():]  # type: ignore[union-attr]
    elif scheme is not None:
        raise ValueError(f"scheme {scheme}:// is not read (local paths, file:// and s3:// URIs are)")
    return open_location(text, storage)


def source_uri(location: Location) -> str:
    """How lineage names an input: file:///abs/path on the local disk, s3://bucket/key otherwise."""
    return Path(location.path).resolve().as_uri() if location.is_local else location.uri


def iter_record_export(export: Location, defaults: AccessDefaults,
                       quarantined: list[Quarantined]) -> Iterator[PendingInput]:
    """The export's records, read line by line (the file is never held whole in memory)."""
    seen: dict[str, int] = {}
    base, number = source_uri(export), 0
    try:
        arrived = export.arrived_at()  # every record of an export arrived with it
        with export.open_binary() as fh:
            for number, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                uri = f"{base}#L{number}"
                try:
                    source, data = parse_record_line(raw.decode("utf-8"), defaults)
                except UnicodeDecodeError:
                    quarantined.append(Quarantined(uri=uri, reason=f"line {number}: not UTF-8", line=number))
                    continue
                except ValueError as exc:
                    quarantined.append(Quarantined(uri=uri, reason=f"line {number}: {exc}", line=number))
                    continue
                if source.doc_id in seen:
                    quarantined.append(Quarantined(
                        uri=uri, line=number,
                        reason=f"line {number}: duplicate doc_id {source.doc_id!r} (first on line {seen[source.doc_id]})"))
                    continue
                seen[source.doc_id] = number
                yield PendingInput(source=source.model_copy(update={"uri": uri, "arrived_at": arrived}),
                                   data=data)
    except OSError as exc:  # storage failed: the lines already read stand
        where = f" after line {number}" if number else ""
        quarantined.append(Quarantined(uri=base, reason=f"unreadable{where}: {exc}"))


def without_suffix(path: str) -> PurePosixPath:
    """The path without its extension; a compressed file's (`page-0001.xml.gz`) without both, so it
    names the same document its uncompressed form names."""
    stem = PurePosixPath(path)
    if stem.suffix.lower() == ".gz":
        stem = stem.with_suffix("")
    return stem.with_suffix("")


def doc_id_from_path(file: Location, root: Location | None) -> str:
    """A folder's files are named by their path inside it; a lone file by its stem."""
    rel = file.relative_to(root) if root else file.name
    return without_suffix(str(rel)).as_posix()


def file_input(file: Location, root: Location | None, defaults: AccessDefaults,
               entry: SidecarEntry | None = None) -> PendingInput:
    """A file named by its path, with what its folder's sidecar says about it taking precedence."""
    entry = entry or SidecarEntry(file=file.name)
    doc_id = entry.doc_id or doc_id_from_path(file, root)
    source = SourceInput(
        source_id=doc_id, uri=source_uri(file), doc_id=doc_id,
        corpus=entry.corpus or defaults.corpus or "files", date=entry.date,
        tenant=entry.tenant or defaults.tenant, groups=sorted(set(entry.groups or defaults.groups)),
        title=entry.title or without_suffix(file.name).name, metadata=dict(entry.metadata),
        declared_media_type=None, valid_from=entry.valid_from, valid_to=entry.valid_to,
    )
    return PendingInput(source=source, location=file)


def is_walked(rel: str) -> bool:
    """Sidecars, desktop litter and anything under a hidden name are not inputs."""
    parts = PurePosixPath(rel).parts
    return (parts[-1] not in IGNORED_NAMES and not parts[-1].lower().endswith(PARTIAL_SUFFIXES)
            and not any(part.startswith(".") for part in parts))


def iter_folder(folder: Location, defaults: AccessDefaults, quarantined: list[Quarantined],
                skip: Collection[str] = (), limits: InspectionLimits | None = None) -> Iterator[PendingInput]:
    """The folder's files (or the prefix's objects) in a stable order, each described by the
    nearest sidecar that names it (see `tasks.ingest.sidecar`: every subfolder may hold one).
    `limits.max_bytes` bounds what a package's gzipped ALTO page may inflate to, as for a lone file."""
    try:
        listed = {f.relative_to(folder): f for f in folder.files()}
    except OSError as exc:
        quarantined.append(Quarantined(uri=source_uri(folder), reason=f"unreadable: {exc}"))
        return
    if folder.is_local:
        for link, rels in linked_paths(folder.local_path, list(listed)).items():
            # named as the link, not resolved: where it points is not for the record to follow
            quarantined.append(Quarantined(uri=(folder.local_path / link).absolute().as_uri(), reason=(
                f"symbolic link, not followed ({len(rels)} file(s) below it are not read): "
                "only files stored inside the ingested folder are ingested")))
            for rel in rels:
                del listed[rel]
    # `skip`: files left for a later run (still being written), by URI
    by_rel = {rel: listed[rel] for rel in sorted(listed, key=PurePosixPath)
              if is_walked(rel) and source_uri(listed[rel]) not in skip}
    sidecars = read_sidecars(folder, list(listed))
    for rel, reason in sidecars.named().items():
        if rel not in by_rel:
            quarantined.append(Quarantined(uri=source_uri(folder / rel), reason=reason))
    seen: dict[str, str] = {}
    # Issue packages (METS + ALTO) are read whole: their articles are the inputs, not their files
    articles, taken = package_inputs(by_rel, source_uri, Access(defaults.tenant, defaults.groups),
                                     sidecars.describe, quarantined, (limits or InspectionLimits()).max_bytes)
    for source, data in articles:
        seen[source.doc_id] = source.uri
        yield PendingInput(source=source, data=data)
    by_rel = {rel: file for rel, file in by_rel.items() if rel not in taken}
    for rel, file in by_rel.items():
        entry, refusal = sidecars.describe(rel)
        if refusal is not None:
            quarantined.append(Quarantined(uri=source_uri(file), reason=refusal))
            continue
        if is_record_export(rel):  # an export dropped in a folder is its records, not one text
            yield from iter_record_export(file, export_defaults(defaults, entry), quarantined)
            continue
        pending = file_input(file, folder, defaults, entry)
        doc_id = pending.source.doc_id
        if doc_id in seen:
            quarantined.append(Quarantined(uri=pending.source.uri,
                                           reason=f"duplicate doc_id {doc_id!r} (also {seen[doc_id]})"))
            continue
        seen[doc_id] = rel
        yield pending


def linked_paths(root: Path, rels: list[str]) -> dict[str, list[str]]:
    """Paths reached through a symbolic link, by the first link on their way.

    A link can point anywhere (/etc/passwd, another tenant's fonds) or loop back into the folder
    (one file under forty names); neither is read, whatever it points to.
    """
    out: dict[str, list[str]] = {}
    for rel in rels:
        parts = PurePosixPath(rel).parts
        for depth in range(1, len(parts) + 1):
            if (root.joinpath(*parts[:depth])).is_symlink():
                out.setdefault("/".join(parts[:depth]), []).append(rel)
                break
    return out


def export_defaults(defaults: AccessDefaults, entry: SidecarEntry | None) -> AccessDefaults:
    """A sidecar row naming an export gives its records' defaults (each record may still say)."""
    if entry is None:
        return defaults
    return AccessDefaults(corpus=entry.corpus or defaults.corpus, tenant=entry.tenant or defaults.tenant,
                          groups=entry.groups or defaults.groups)


def is_record_export(name: str) -> bool:
    return PurePosixPath(name).suffix.lower() in {".jsonl", ".ndjson"}


def iter_inputs(sources: Sequence[str | Path], defaults: AccessDefaults, quarantined: list[Quarantined],
                storage: StorageSettings | None = None, skip: Collection[str] = (),
                limits: InspectionLimits | None = None) -> Iterator[PendingInput]:
    """Expand the command-line inputs (paths, file:// and s3:// URIs) into inputs, in a stable order.

    `storage` holds the endpoint and credentials for s3:// inputs (the warehouse's, by default);
    `limits` the run's inspection limits (the defaults when None): a package's gzipped ALTO page
    inflating beyond `max_bytes` refuses its package, as a lone gzipped file is refused.
    """
    limits = limits or InspectionLimits()
    taken: set[str] = set()  # files of a package named by its METS among the sources
    for source in sources:  # such a package first: it takes its ALTO even where they are named too
        try:
            location = open_source(source, storage)
            lone_mets = location.is_file() and not is_record_export(location.name) and is_mets_file(location)
        except (ValueError, OSError):
            continue  # said below
        if lone_mets and source_uri(location) not in taken:
            articles, files = lone_mets_inputs(location, source_uri, Access(defaults.tenant, defaults.groups),
                                               quarantined, limits.max_bytes)
            taken |= files
            yield from (PendingInput(source=src, data=data) for src, data in articles)
    for source in sources:
        try:
            location = open_source(source, storage)
            is_file = location.is_file()
            exists = is_file or location.exists()
        except ValueError as exc:
            quarantined.append(Quarantined(uri=str(source), reason=str(exc)))
            continue
        except OSError as exc:  # endpoint unreachable, access denied, ...
            quarantined.append(Quarantined(uri=str(source), reason=f"unreadable: {exc}"))
            continue
        if not exists:
            quarantined.append(Quarantined(uri=str(source), reason="path does not exist") if location.is_local
                               else Quarantined(uri=location.uri, reason=f"no object or prefix at {location.uri}"))
        elif not is_file:
            yield from iter_folder(location, defaults, quarantined, skip, limits)
        elif is_record_export(location.name):
            yield from iter_record_export(location, defaults, quarantined)
        elif source_uri(location) in taken:
            continue  # read with its package
        else:
            yield file_input(location, None, defaults)


def acquire_one(layout: StoreLayout, pending: PendingInput) -> Revision:
    """Store the bytes and name the revision; the same bytes again give the same revision."""
    data = pending.read()
    digest, _ = put_blob(layout, data)
    src = pending.source
    arrived = src.arrived_at or (pending.location.arrived_at() if pending.location is not None else None)
    return Revision(
        revision_id=revision_id_for(src.source_id, digest), source_id=src.source_id,
        doc_id=src.doc_id, uri=src.uri, corpus=src.corpus, date=src.date, title=src.title,
        tenant=src.tenant, groups=src.groups, digest=digest, size=len(data),
        media_type=src.declared_media_type or "application/octet-stream",
        acquired_at=datetime.now(timezone.utc),
        metadata_json=json.dumps(src.metadata, ensure_ascii=False, sort_keys=True),
        valid_from=src.valid_from, valid_to=src.valid_to, arrived_at=arrived,
    )


class AcquireInput(BaseModel):
    """The acquire stage's input: the run's sources, and what they are given, refused or left."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    sources: list[str]  # paths, file:// and s3:// URIs
    defaults: AccessDefaults  # the access of inputs that name none
    layout: StoreLayout
    storage: StorageSettings | None = None  # endpoint and credentials of s3:// inputs
    # documents deleted before: their revisions are refused here, before any parsing
    tombstones: TombstoneList = Field(default_factory=TombstoneList)
    skip: list[str] = Field(default_factory=list)  # URIs of folder files left for a later run
    limits: InspectionLimits = Field(default_factory=InspectionLimits)  # the run's: packages' gzipped ALTO


def acquire(job: AcquireInput) -> Screened:
    """The sources' revisions, their bytes stored; what cannot be read, or was deleted, refused."""
    quarantined: list[Quarantined] = []
    revisions: list[Revision] = []
    seen: dict[str, str] = {}
    pending = list(iter_inputs(job.sources, job.defaults, quarantined, job.storage, set(job.skip), job.limits))
    with StageProgress("acquire", len(pending), "source") as progress:
        for item in pending:
            sid = item.source.source_id
            if problem := doc_id_problem(item.source.doc_id):  # a file's name, or what its sidecar says
                quarantined.append(Quarantined(uri=item.source.uri, reason=problem))
            elif sid in seen:
                quarantined.append(Quarantined(uri=item.source.uri,
                                               reason=f"duplicate source {sid!r} in this run (first: {seen[sid]})"))
            else:
                try:
                    revisions.append(acquire_one(job.layout, item))
                    seen[sid] = item.source.uri
                except OSError as exc:
                    quarantined.append(Quarantined(uri=item.source.uri, reason=f"unreadable: {exc}"))
            progress.advance()
    kept, refused = refuse_tombstoned(revisions, job.tombstones)
    return Screened(kept=kept, quarantined=quarantined + refused)


def refuse_tombstoned(revisions: list[Revision], tombstones: TombstoneList) -> tuple[list[Revision], list[Quarantined]]:
    """A deleted document stays deleted: re-ingesting it is refused, not silently served again."""
    dead = {t.doc_id: t for t in tombstones.tombstones}
    kept, refused = [], []
    for rev in revisions:
        t = dead.get(rev.doc_id)
        if t is None:
            kept.append(rev)
        else:
            refused.append(Quarantined(uri=rev.uri, digest=rev.digest,
                                       reason=f"document {rev.doc_id!r} was deleted on {t.at:%Y-%m-%d} "
                                              f"({t.reason or 'no reason given'}); not re-ingested"))
    return kept, refused


acquire_task = as_task(acquire, "acquire", reads_storage=True)
