"""Sidecar: per-file metadata for a folder, from `sidecar.json` (a list of objects) or `sidecar.csv`.

Keys: `file` (path relative to the folder, required), `doc_id`, `corpus`, `date` (YYYY-MM-DD),
`title`, `tenant`, `groups` (a list in JSON; separated by ";" in CSV), `valid_from` / `valid_to`
(ISO 8601 date or time: an embargo until, a withdrawal at; see schemas.validity). Other keys are
kept as metadata. A row that is wrong refuses its file — the file's access metadata cannot be trusted,
so it must not be published with the defaults — and a sidecar that cannot be read refuses every
file of the folder, for the same reason. The folder may be local or an s3:// prefix (a `Location`);
a sidecar that cannot be fetched counts as unreadable.

Nested fonds: any folder below the walked one may hold its own sidecar, describing the files in
that folder and below it, with `file` paths relative to that folder. For each file the nearest
sidecar that names it decides, whole: its row (or its refusal) applies, rows of farther sidecars
for the same file are not consulted, and nothing is merged field by field (a sidecar has no
folder-wide defaults). A file no sidecar names gets the command-line defaults. A sidecar that
cannot be read refuses every file of its own subtree only, even those a deeper sidecar names.
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from datetime import date as date_type
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from schemas.validity import InvalidInstant, parse_interval
from tasks.ingest.identifiers import doc_id_problem
from tasks.store.location import Location, open_location

SIDECAR_NAMES = ("sidecar.json", "sidecar.csv")
KNOWN_KEYS = {"file", "doc_id", "corpus", "date", "title", "tenant", "groups", "valid_from", "valid_to"}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class SidecarError(ValueError):
    """The sidecar as a whole cannot be read; every file of its folder is refused."""


@dataclass(frozen=True)
class SidecarEntry:
    file: str  # POSIX path relative to the folder
    doc_id: str | None = None
    corpus: str | None = None
    date: str | None = None
    title: str | None = None
    tenant: str | None = None
    groups: tuple[str, ...] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    valid_from: datetime | None = None
    valid_to: datetime | None = None


@dataclass
class Sidecar:
    name: str | None = None  # which file it came from; None when the folder has none
    entries: dict[str, SidecarEntry] = field(default_factory=dict)  # by relative path
    refused: dict[str, str] = field(default_factory=dict)  # relative path → reason


def _optional_str(row: dict, key: str) -> str | None:
    value = row.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key} must be a non-empty string")
    return value.strip()


def _groups(value: Any) -> tuple[str, ...] | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = [g for g in re.split(r"[;,]", value)]
    if not isinstance(value, list) or not all(isinstance(g, str) for g in value):
        raise ValueError("groups must be a list of strings")
    groups = tuple(sorted({g.strip() for g in value if g.strip()}))
    if not groups:
        raise ValueError("groups is empty")
    return groups


def _relative_file(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("missing file")
    path = PurePosixPath(value.strip().replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"file {value!r} must be a path inside the folder")
    return path.as_posix()


def entry_from_row(row: dict[str, Any]) -> SidecarEntry:
    """Validate one row; raises ValueError with a readable reason."""
    date = _optional_str(row, "date")
    if date is not None:
        if not _DATE.match(date):
            raise ValueError(f"date {date!r} is not YYYY-MM-DD")
        try:
            date_type.fromisoformat(date)
        except ValueError:
            raise ValueError(f"date {date!r} is not a calendar date") from None
    try:
        valid_from, valid_to = parse_interval(row.get("valid_from"), row.get("valid_to"))
    except InvalidInstant as exc:
        raise ValueError(str(exc)) from None
    doc_id = _optional_str(row, "doc_id")
    if doc_id is not None and (problem := doc_id_problem(doc_id)):
        raise ValueError(problem)
    return SidecarEntry(
        file=_relative_file(row.get("file")), doc_id=doc_id,
        corpus=_optional_str(row, "corpus"), date=date, title=_optional_str(row, "title"),
        tenant=_optional_str(row, "tenant"), groups=_groups(row.get("groups")),
        metadata={k: v for k, v in row.items() if k not in KNOWN_KEYS and v not in (None, "")},
        valid_from=valid_from, valid_to=valid_to,
    )


def sidecar_rows(name: str, text: str) -> list[dict[str, Any]]:
    if name.endswith(".json"):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SidecarError(f"{name} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
        except RecursionError:
            raise SidecarError(f"{name} is JSON nested too deeply to be a list of rows") from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise SidecarError(f"{name} must be a JSON list of objects")
        return [{k: _trimmed(v) for k, v in row.items()} for row in rows]
    reader = csv.DictReader(io.StringIO(text))
    try:
        if not reader.fieldnames or "file" not in reader.fieldnames:
            raise SidecarError(f"{name} has no 'file' column")
        return [{k.strip(): _trimmed(v) for k, v in row.items() if isinstance(k, str) and k} for row in reader]
    except csv.Error as exc:  # a NUL byte, a field over csv's size limit, ...: not a readable table
        raise SidecarError(f"{name} is not a readable CSV table (line {reader.line_num}: {exc})") from None


def _trimmed(value: Any) -> Any:
    """A value as both formats give it: a blank CSV cell is often spaces, and so is a JSON value
    exported from the same spreadsheet; either way it says nothing (a title of " " is no title),
    and the same row in JSON or CSV describes its file the same way."""
    return value.strip() if isinstance(value, str) else value


def parse_sidecar(name: str, text: str) -> Sidecar:
    """Entries by file, and the files refused by a bad or repeated row."""
    sidecar = Sidecar(name=name)
    for number, row in enumerate(sidecar_rows(name, text), start=1):
        where = f"{name} row {number}"
        try:
            entry = entry_from_row(row)
        except ValueError as exc:
            file = row.get("file")
            key = file.strip() if isinstance(file, str) and file.strip() else f"<{where}>"
            sidecar.refused[key] = f"{where}: {exc}"
            continue
        if entry.file in sidecar.entries or entry.file in sidecar.refused:
            sidecar.refused[entry.file] = f"{where}: {entry.file} is described twice"
            sidecar.entries.pop(entry.file, None)
            continue
        sidecar.entries[entry.file] = entry
    return sidecar


def _load(folder: Location, sub: str, names: list[str]) -> Sidecar:
    """Parse the sidecar among `names` in `folder`, which is `sub` inside the walked folder."""
    if not names:
        return Sidecar()
    prefix = f"{sub}/" if sub else ""
    if len(names) > 1:
        raise SidecarError(f"both {prefix}sidecar.json and {prefix}sidecar.csv are present; keep one")
    label = prefix + names[0]  # how reasons name it
    location = folder / names[0]
    try:
        text = location.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SidecarError(f"{label} is not UTF-8") from None
    except OSError as exc:  # object storage unreachable or refusing: nothing about the files is known
        raise SidecarError(f"{location.uri} could not be read ({exc})") from None
    return parse_sidecar(label, text)


def read_sidecar(folder: Location | Path) -> Sidecar:
    """The folder's own sidecar, or an empty one; raises SidecarError when it cannot be read."""
    if isinstance(folder, Path):
        folder = open_location(folder)
    try:
        present = [n for n in SIDECAR_NAMES if (folder / n).is_file()]
    except OSError as exc:
        raise SidecarError(f"the sidecar of {folder.uri} could not be read ({exc})") from None
    return _load(folder, "", present)


@dataclass
class SidecarTree:
    """Every sidecar of a walked folder and its subfolders, keyed by subfolder ("" is the folder)."""

    sidecars: dict[str, Sidecar] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)  # subfolder → why its sidecar cannot be read

    def describe(self, rel: str) -> tuple[SidecarEntry | None, str | None]:
        """(entry, None) from the nearest sidecar naming `rel`, (None, reason) when it is refused
        (by that sidecar or by an unreadable one above it), (None, None) when no sidecar names it."""
        folders = _ancestors(rel)
        for sub in folders:
            if sub in self.broken:
                return None, self.broken[sub]
        for sub in reversed(folders):
            sidecar = self.sidecars.get(sub)
            if sidecar is None:
                continue
            inner = rel[len(sub) + 1:] if sub else rel
            if inner in sidecar.refused:
                return None, sidecar.refused[inner]
            if inner in sidecar.entries:
                return sidecar.entries[inner], None
        return None, None

    def named(self) -> dict[str, str]:
        """Every path some row names (inside the walked folder) → what to report if it is absent."""
        return {f"{sub}/{inner}" if sub else inner:
                sidecar.refused.get(inner) or f"{sidecar.name} names {inner}, which is not in the folder"
                for sub, sidecar in self.sidecars.items()
                for inner in sorted(set(sidecar.entries) | set(sidecar.refused))}


def _ancestors(rel: str) -> list[str]:
    """The folders enclosing `rel`, outermost first: "" then "a", "a/b"..."""
    parts = PurePosixPath(rel).parts[:-1]
    return ["/".join(parts[:depth]) for depth in range(len(parts) + 1)]


def is_sidecar_path(rel: str) -> bool:
    parts = PurePosixPath(rel).parts
    return parts[-1] in SIDECAR_NAMES and not any(part.startswith(".") for part in parts)


def read_sidecars(folder: Location, listed: list[str]) -> SidecarTree:
    """The sidecars among `listed` (paths inside `folder`, as its walk found them), each parsed;
    one that cannot be read is kept as a reason for its subfolder, not raised."""
    names: dict[str, list[str]] = {}
    for rel in sorted(r for r in listed if is_sidecar_path(r)):
        sub, _, name = rel.rpartition("/")
        names.setdefault(sub, []).append(name)
    tree = SidecarTree()
    for sub, present in sorted(names.items()):
        try:
            tree.sidecars[sub] = _load(folder / sub if sub else folder, sub, present)
        except SidecarError as exc:
            tree.broken[sub] = f"sidecar unreadable: {exc}"
    return tree
