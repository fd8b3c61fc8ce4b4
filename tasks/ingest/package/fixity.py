"""Fixity of a delivery: every delivered file against the checksum its METS (or a checksum
manifest: BagIt `manifest-<alg>.txt`, a `*_manifest.txt` of "<digest>  <path>" lines) records.

A mismatch is a `FixityError` naming the file and the algorithm; the whole package is refused
with it. A file the METS lists but the delivery lacks (image masters are rarely sent) is recorded
as not delivered, not an error; one delivered under another name (Gallica's table of contents)
is found by its checksum.
"""
from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tasks.ingest.gunzip import InflateRefused, inflated_chunks

# METS CHECKSUMTYPE values (and BagIt names) → hashlib names
ALGORITHMS = {"md5": "md5", "sha-1": "sha1", "sha1": "sha1", "sha-256": "sha256", "sha256": "sha256",
              "sha-384": "sha384", "sha384": "sha384", "sha-512": "sha512", "sha512": "sha512"}
BAGIT_MANIFEST = re.compile(r"^(?:tag)?manifest-([a-z0-9-]+)\.txt$", re.IGNORECASE)
NAMED_MANIFEST = re.compile(r"_manifest\.txt$", re.IGNORECASE)
_HEX = {"md5": 32, "sha1": 40, "sha256": 64, "sha384": 96, "sha512": 128}


class FixityError(ValueError):
    """A delivered file does not match its recorded checksum."""


@dataclass(frozen=True)
class Expected:
    path: str  # inside the package root
    algorithm: str  # hashlib name
    digest: str  # lower-case hex
    what: str  # how a reason names the file ("ALTO p.2", "METS toc", "file")
    source: str  # which METS or manifest recorded it


@dataclass
class FixityReport:
    verified: dict[str, list[str]] = field(default_factory=dict)  # path → algorithms checked
    not_delivered: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # listed path → delivered path

    def summary(self) -> dict:
        return {"verified": len(self.verified), "not_delivered": sorted(self.not_delivered),
                **({"renamed": dict(sorted(self.renamed.items()))} if self.renamed else {})}


def algorithm(name: str | None) -> str | None:
    return ALGORITHMS.get((name or "").strip().lower())


def checksum_manifest_algorithm(filename: str) -> str | None:
    """The algorithm of a checksum manifest file, by its name; None when it is not one."""
    base = posixpath.basename(filename)
    if m := BAGIT_MANIFEST.match(base):
        return algorithm(m.group(1))
    if NAMED_MANIFEST.search(base):
        return "sha256"  # "<digest>  <path>" lines of sha256, unless the digests say otherwise
    return None


def read_checksum_manifest(text: str, manifest_path: str, default_algorithm: str) -> list[Expected]:
    """Lines "<digest> <path>" (BagIt, sha256sum output); paths relative to the manifest's folder."""
    out = []
    folder = posixpath.dirname(manifest_path)
    for line in text.splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) != 2:
            continue
        digest, path = parts[0].lower(), parts[1].strip().lstrip("*")
        if not re.fullmatch(r"[0-9a-f]+", digest):
            continue
        alg = next((a for a, n in _HEX.items() if n == len(digest)), default_algorithm)
        out.append(Expected(path=posixpath.normpath(posixpath.join(folder, path)), algorithm=alg, digest=digest,
                            what="file", source=manifest_path))
    return out


def verify(expected: Iterable[Expected], delivered: set[str], read: Callable[[str], bytes],
           max_bytes: int) -> FixityReport:
    """Check each expectation against the delivered bytes; raises FixityError on the first mismatch.

    `read(path)` gives a delivered file's bytes (read once per file, hashed once per algorithm);
    a gzipped file whose checksum is that of what it holds is inflated within `max_bytes`."""
    report = FixityReport()
    digests: dict[tuple[str, str], str] = {}
    cache: dict[str, bytes] = {}

    def digest_of(path: str, alg: str) -> str:
        if (path, alg) not in digests:
            if path not in cache:
                cache.clear()  # one file's bytes at a time
                cache[path] = read(path)
            digests[(path, alg)] = hashlib.new(alg, cache[path]).hexdigest()
        return digests[(path, alg)]

    expected = list(expected)
    listed = {e.path for e in expected}
    for exp in expected:
        path = exp.path
        if path not in delivered:
            # delivered under another name in the same folder, with the recorded checksum?
            twin = next((p for p in sorted(delivered) if p not in listed
                         and posixpath.dirname(p) == posixpath.dirname(path)
                         and digest_of(p, exp.algorithm) == exp.digest), None)
            if twin is None and path + ".gz" in delivered:  # gzipped by the deliverer
                twin = path + ".gz"
                if digest_of(twin, exp.algorithm) != exp.digest:
                    inflated = hashlib.new(exp.algorithm)
                    try:  # hashed as it inflates, within the limit: a bomb is never held whole
                        for chunk in inflated_chunks(read(twin), max_bytes):
                            inflated.update(chunk)
                    except InflateRefused as exc:
                        raise FixityError(f"fixity: {exp.what} ({twin}): {exc}") from None
                    if inflated.hexdigest() != exp.digest:
                        raise FixityError(f"fixity: {exp.what} {exp.algorithm} mismatch "
                                          f"({twin}, recorded in {exp.source})")
            if twin is None:
                if path not in report.not_delivered:
                    report.not_delivered.append(path)
                continue
            report.renamed[path] = twin
            report.verified.setdefault(twin, []).append(exp.algorithm)
            continue
        if digest_of(path, exp.algorithm) != exp.digest:
            raise FixityError(f"fixity: {exp.what} {exp.algorithm} mismatch ({path}, recorded in {exp.source})")
        report.verified.setdefault(path, []).append(exp.algorithm)
    return report
