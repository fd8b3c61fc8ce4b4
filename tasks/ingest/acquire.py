"""Acquire: name the inputs, store their bytes content-addressed, record source → revision.

Inputs are JSONL record exports (one document a line) and files or folders of files. A bad
record line is quarantined with its line number; the other lines go on.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date as date_type
from datetime import datetime, timezone
from pathlib import Path

from schemas.generation import Quarantined
from schemas.lineage import RECORD_MEDIA_TYPE, Revision, SourceInput
from tasks.ingest.sidecar import SidecarEntry, SidecarError, read_sidecar
from tasks.store.blobs import put_blob
from tasks.store.layout import StoreLayout

DATE_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}$")
IGNORED_NAMES = {"sidecar.json", "sidecar.csv", ".DS_Store", "Thumbs.db"}


@dataclass(frozen=True)
class AccessDefaults:
    corpus: str | None
    tenant: str
    groups: tuple[str, ...]


@dataclass
class PendingInput:
    """A named input whose bytes are produced lazily, so a large batch is never all in memory."""

    source: SourceInput
    path: Path | None = None
    data: bytes | None = None

    def read(self) -> bytes:
        return self.data if self.data is not None else self.path.read_bytes()  # type: ignore[union-attr]


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
    if not isinstance(record, dict):
        raise ValueError("a record must be a JSON object")
    doc_id = record.get("doc_id")
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise ValueError("missing or empty doc_id")
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
    source = SourceInput(
        source_id=doc_id, uri=f"record:{doc_id}", doc_id=doc_id, corpus=corpus, date=date,
        title=record.get("title"), tenant=tenant, groups=sorted(set(groups)), metadata=metadata,
        declared_media_type=RECORD_MEDIA_TYPE,
    )
    return source, canonical_record_bytes(record)


def iter_record_export(path: Path, defaults: AccessDefaults,
                       quarantined: list[Quarantined]) -> Iterator[PendingInput]:
    seen: dict[str, int] = {}
    with path.open("r", encoding="utf-8", errors="strict") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            uri = f"{path.resolve().as_uri()}#L{number}"
            try:
                source, data = parse_record_line(line, defaults)
            except (ValueError, UnicodeDecodeError) as exc:
                quarantined.append(Quarantined(uri=uri, reason=f"line {number}: {exc}", line=number))
                continue
            if source.doc_id in seen:
                quarantined.append(Quarantined(
                    uri=uri, line=number,
                    reason=f"line {number}: duplicate doc_id {source.doc_id!r} (first on line {seen[source.doc_id]})"))
                continue
            seen[source.doc_id] = number
            yield PendingInput(source=source.model_copy(update={"uri": uri}), data=data)


def doc_id_from_path(path: Path, root: Path | None) -> str:
    """A folder's files are named by their path inside it; a lone file by its stem."""
    rel = path.relative_to(root) if root else Path(path.name)
    return rel.with_suffix("").as_posix()


def file_input(path: Path, root: Path | None, defaults: AccessDefaults,
               entry: SidecarEntry | None = None) -> PendingInput:
    """A file named by its path, with what its folder's sidecar says about it taking precedence."""
    entry = entry or SidecarEntry(file=path.name)
    doc_id = entry.doc_id or doc_id_from_path(path, root)
    source = SourceInput(
        source_id=doc_id, uri=path.resolve().as_uri(), doc_id=doc_id,
        corpus=entry.corpus or defaults.corpus or "files", date=entry.date,
        tenant=entry.tenant or defaults.tenant, groups=sorted(set(entry.groups or defaults.groups)),
        title=entry.title or path.stem, metadata=dict(entry.metadata), declared_media_type=None,
    )
    return PendingInput(source=source, path=path)


def iter_folder(folder: Path, defaults: AccessDefaults,
                quarantined: list[Quarantined]) -> Iterator[PendingInput]:
    """The folder's files in a stable order, described by its sidecar when it has one."""
    files = sorted(p for p in folder.rglob("*") if p.is_file()
                   and p.name not in IGNORED_NAMES
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    try:
        sidecar = read_sidecar(folder)
    except SidecarError as exc:
        quarantined.extend(Quarantined(uri=f.resolve().as_uri(), reason=f"sidecar unreadable: {exc}")
                           for f in files)
        return
    by_rel = {f.relative_to(folder).as_posix(): f for f in files}
    for rel in sorted(set(sidecar.entries) | set(sidecar.refused)):
        if rel not in by_rel:
            reason = sidecar.refused.get(rel) or f"{sidecar.name} names {rel}, which is not in the folder"
            quarantined.append(Quarantined(uri=(folder / rel).resolve().as_uri(), reason=reason))
    seen: dict[str, str] = {}
    for rel, file in by_rel.items():
        if rel in sidecar.refused:
            quarantined.append(Quarantined(uri=file.resolve().as_uri(), reason=sidecar.refused[rel]))
            continue
        pending = file_input(file, folder, defaults, sidecar.entries.get(rel))
        doc_id = pending.source.doc_id
        if doc_id in seen:
            quarantined.append(Quarantined(uri=pending.source.uri,
                                           reason=f"duplicate doc_id {doc_id!r} (also {seen[doc_id]})"))
            continue
        seen[doc_id] = rel
        yield pending


def is_record_export(path: Path) -> bool:
    return path.suffix.lower() in {".jsonl", ".ndjson"}


def iter_inputs(paths: list[Path], defaults: AccessDefaults,
                quarantined: list[Quarantined]) -> Iterator[PendingInput]:
    """Expand the command-line paths into inputs, in a stable order."""
    for path in paths:
        if not path.exists():
            quarantined.append(Quarantined(uri=str(path), reason="path does not exist"))
        elif path.is_dir():
            yield from iter_folder(path, defaults, quarantined)
        elif is_record_export(path):
            yield from iter_record_export(path, defaults, quarantined)
        else:
            yield file_input(path, None, defaults)


def acquire_one(layout: StoreLayout, pending: PendingInput) -> Revision:
    """Store the bytes and name the revision; the same bytes again give the same revision."""
    data = pending.read()
    digest, _ = put_blob(layout, data)
    src = pending.source
    return Revision(
        revision_id=revision_id_for(src.source_id, digest), source_id=src.source_id,
        doc_id=src.doc_id, uri=src.uri, corpus=src.corpus, date=src.date, title=src.title,
        tenant=src.tenant, groups=src.groups, digest=digest, size=len(data),
        media_type=src.declared_media_type or "application/octet-stream",
        acquired_at=datetime.now(timezone.utc),
        metadata_json=json.dumps(src.metadata, ensure_ascii=False, sort_keys=True),
    )
