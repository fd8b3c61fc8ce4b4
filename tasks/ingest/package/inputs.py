"""A folder's issue packages as inputs: one per article (and per page of text outside articles).

Called by acquisition on each walked folder (local or s3://): the packages found there take their
files out of the ordinary walk; a damaged package is refused whole, with the reason, and the rest
of the batch goes on. A sidecar row naming a package's METS describes every document of it
(corpus, tenant, groups, validity, metadata; `title` names the newspaper, `doc_id` replaces the
`<title>/<date>/<issue>` prefix).
"""
from __future__ import annotations

import json
from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from schemas.generation import Quarantined
from schemas.lineage import SourceInput
from schemas.package import ARTICLE_MEDIA_TYPE, ArticleRecord
from tasks.ingest.package.mets import looks_like_mets
from tasks.ingest.package.issue import (IMAGE_EXTENSIONS, FoundPackage, Overrides, PackageRefused, find_packages,
                                        read_package)
from tasks.ingest.sidecar import SidecarEntry
from tasks.store.location import Location

HEAD_BYTES = 4096


@dataclass(frozen=True)
class Access:
    tenant: str
    groups: tuple[str, ...]


def record_bytes(record: ArticleRecord) -> bytes:
    """Canonical JSON: the same package gives the same bytes, whatever folder it was read from
    and however it was named. What the fixity check found depends on the delivery (a bag's
    manifest, the files named), not on the article: it goes with the source's metadata, not its bytes."""
    data = record.model_dump(mode="json")
    meta = data["metadata"]
    if "package" in meta:
        meta["package"] = {k: v for k, v in meta["package"].items() if k != "fixity"}
    meta["source_files"] = [{k: v for k, v in f.items() if k != "fixity"} for f in meta.get("source_files", [])]
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def _head(location: Location) -> bytes:
    with location.open_binary() as fh:
        return fh.read(HEAD_BYTES)


def package_inputs(by_rel: dict[str, Location], uri_of: Callable[[Location], str], access: Access,
                   describe: Callable[[str], tuple[SidecarEntry | None, str | None]],
                   quarantined: list[Quarantined], max_bytes: int) -> tuple[list[tuple[SourceInput, bytes]], set[str]]:
    """The inputs of the packages among `by_rel` (relative path → file) and the paths they took;
    `max_bytes` is the configured size limit (`limits.max_bytes`) a gzipped ALTO page may inflate to."""
    rels = list(by_rel)
    packages, unreadable = find_packages(rels, lambda r: _head(by_rel[r]), lambda r: by_rel[r].read_bytes())
    taken: set[str] = set()
    for rel, reason in unreadable.items():
        quarantined.append(Quarantined(uri=uri_of(by_rel[rel]), reason=reason))
        taken.add(rel)
    out: list[tuple[SourceInput, bytes]] = []
    for pkg in packages:
        out.extend(_one_package(pkg, by_rel, rels, uri_of, access, describe, quarantined, max_bytes))
        taken |= pkg.files  # after reading: files found under another name by their checksum too
    return out, taken


def is_mets_file(location: Location) -> bool:
    try:
        return looks_like_mets(_head(location))
    except OSError:
        return False


def lone_mets_inputs(mets: Location, uri_of: Callable[[Location], str], access: Access,
                     quarantined: list[Quarantined], max_bytes: int) -> tuple[list[tuple[SourceInput, bytes]], set[str]]:
    """A METS named on its own (or among a list of its files): the package it roots, read from its
    folder (the files it lists, nothing else there); and the URIs of the files it took."""
    folder = mets._at(mets.path.rstrip("/").rsplit("/", 1)[0])
    try:
        by_rel = {f.relative_to(folder): f for f in folder.files()}
    except OSError as exc:
        quarantined.append(Quarantined(uri=uri_of(mets), reason=f"unreadable: {exc}"))
        return [], set()
    rels = list(by_rel)
    packages, unreadable = find_packages(rels, lambda r: _head(by_rel[r]), lambda r: by_rel[r].read_bytes())
    pkg = next((p for p in packages if p.root.path == mets.name), None)
    if pkg is None:
        reason = unreadable.get(mets.name) or "a METS without pages of ALTO is not an issue package"
        quarantined.append(Quarantined(uri=uri_of(mets), reason=reason))
        return [], {uri_of(mets)}
    found = list(_one_package(pkg, by_rel, rels, uri_of, access, lambda rel: (None, None), quarantined,
                              max_bytes))
    return found, {uri_of(by_rel[r]) for r in pkg.files}


def _one_package(pkg: FoundPackage, by_rel: dict[str, Location], rels: list[str], uri_of, access: Access,
                 describe, quarantined: list[Quarantined], max_bytes: int) -> Iterator[tuple[SourceInput, bytes]]:
    mets = by_rel[pkg.root.path]
    uri = uri_of(mets)
    entry, refusal = describe(pkg.root.path)
    if refusal is not None:
        quarantined.append(Quarantined(uri=uri, reason=refusal))
        return
    entry = entry or SidecarEntry(file=pkg.root.path)
    overrides = Overrides(corpus=entry.corpus, newspaper=entry.title, date=entry.date,
                          doc_id_prefix=entry.doc_id, metadata=dict(entry.metadata))
    # the folders above the walked one: where a package filed as <title>/<issue>/ is ingested alone
    walked = PurePosixPath(unquote(urlparse(uri).path)).parents[len(PurePosixPath(pkg.root.path).parts) - 1]
    texts: dict[str, bytes] = {}

    def read(rel: str) -> bytes:  # METS and ALTO are read for fixity, then parsed: fetched once
        if rel.lower().endswith(IMAGE_EXTENSIONS):
            return by_rel[rel].read_bytes()
        if rel not in texts:
            texts[rel] = by_rel[rel].read_bytes()
        return texts[rel]
    try:
        records = read_package(pkg, rels, read, overrides, walked.parts[1:], max_bytes=max_bytes)
    except PackageRefused as exc:
        quarantined.append(Quarantined(uri=uri, reason=f"issue package refused: {exc}"))
        return
    arrived = mets.arrived_at()
    groups = sorted(set(entry.groups or access.groups))
    for record in records:
        anchor = record.metadata.get("article_id") or f"page{record.pages[0].page.page_no}"
        source = SourceInput(
            source_id=record.doc_id, uri=f"{uri}#{anchor}", doc_id=record.doc_id, corpus=record.corpus,
            date=record.date, title=record.title, tenant=entry.tenant or access.tenant, groups=groups,
            metadata=record.metadata, declared_media_type=ARTICLE_MEDIA_TYPE,
            valid_from=entry.valid_from, valid_to=entry.valid_to, arrived_at=arrived)
        yield source, record_bytes(record)
