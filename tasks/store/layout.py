"""Where each kind of state lives under the warehouse and manifests roots.

The warehouse (source blobs, LanceDB, Parquet lineage, indexes, caches) is a Location: a local
folder or an s3:// prefix. The manifests (routing record, generation manifests, tombstones,
query records, the release lock) are always a POSIX folder, since switching relies on an atomic
rename under a file lock.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from schemas.settings import MabillonSettings
from tasks.store.location import Location, open_location

CHUNKS_TABLE = "chunks"
PRINCIPALS_FILE = "principals.json"


def principals_path(settings: MabillonSettings) -> Path:
    """Who may ask (tasks.access.principals): in the home, beside the warehouse and manifests,
    since it is configuration of the home, not state of a release."""
    return settings.home / PRINCIPALS_FILE


@dataclass(frozen=True)
class StoreLayout:
    warehouse: Location
    manifests: Path

    def __post_init__(self) -> None:
        if not isinstance(self.warehouse, Location):  # a plain local path
            object.__setattr__(self, "warehouse", open_location(self.warehouse))

    @classmethod
    def from_settings(cls, settings: MabillonSettings) -> "StoreLayout":
        return cls(warehouse=open_location(settings.warehouse, settings.storage),
                   manifests=settings.manifests)

    # warehouse ------------------------------------------------------------------------------
    @property
    def blobs(self) -> Location:
        return self.warehouse / "blobs" / "sha256"

    def blob_path(self, digest: str) -> Location:
        return self.blobs / digest[:2] / digest

    @property
    def lance(self) -> Location:
        return self.warehouse / "lance"

    def lineage_dir(self, generation: str) -> Location:
        return self.warehouse / "lineage" / generation

    @property
    def lineage_root(self) -> Location:
        return self.warehouse / "lineage"

    def index_dir(self, generation: str) -> Location:
        return self.warehouse / "indexes" / generation

    @property
    def caches(self) -> Location:
        """Per-revision work already done (parsed pages, vectors): what a rerun resumes from."""
        return self.warehouse / "caches"

    @property
    def parsed_root(self) -> Location:
        return self.caches / "parsed"

    def parsed_dir(self, revision_id: str) -> Location:
        return self.parsed_root / revision_id

    @property
    def vectors_root(self) -> Location:
        return self.caches / "vectors"

    def vectors_cache(self, space_id: str, segmenter_id: str, revision_id: str) -> Location:
        return self.vectors_root / space_id / segmenter_id / f"{revision_id}.parquet"

    def space_cache(self, key: str) -> Location:
        return self.caches / "spaces" / f"{key}.json"

    @property
    def encoders(self) -> Location:
        """Query encoders compiled per embedding space (tasks/compiled_encoder.py)."""
        return self.caches / "encoders"

    def encoder_dir(self, space_id: str) -> Location:
        return self.encoders / space_id

    # manifests ------------------------------------------------------------------------------
    @property
    def routing(self) -> Path:
        return self.manifests / "routing.json"

    @property
    def lock(self) -> Path:
        return self.manifests / ".release.lock"

    @property
    def generations(self) -> Path:
        return self.manifests / "generations"

    def manifest_path(self, generation: str) -> Path:
        return self.generations / f"{generation}.yaml"

    def purges_path(self, generation: str) -> Path:
        """Purge records: amendments beside the manifest, which is never rewritten."""
        return self.generations / f"{generation}.purges.yaml"

    @property
    def reports(self) -> Path:
        return self.manifests / "reports"

    @property
    def queries(self) -> Path:
        return self.manifests / "queries"

    @property
    def releases(self) -> Path:
        """Release records: one YAML document per decision on a generation."""
        return self.manifests / "releases"

    def ensure(self) -> "StoreLayout":
        for loc in (self.blobs, self.lance, self.lineage_root, self.caches):
            loc.mkdir()
        for p in (self.generations, self.reports, self.queries):
            p.mkdir(parents=True, exist_ok=True)
        return self
