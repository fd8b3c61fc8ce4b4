"""Where each kind of state lives under the warehouse and manifests roots."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from schemas.settings import MabillonSettings

CHUNKS_TABLE = "chunks"


@dataclass(frozen=True)
class StoreLayout:
    warehouse: Path
    manifests: Path

    @classmethod
    def from_settings(cls, settings: MabillonSettings) -> "StoreLayout":
        return cls(warehouse=settings.warehouse, manifests=settings.manifests)

    # warehouse ------------------------------------------------------------------------------
    @property
    def blobs(self) -> Path:
        return self.warehouse / "blobs" / "sha256"

    def blob_path(self, digest: str) -> Path:
        return self.blobs / digest[:2] / digest

    @property
    def lance(self) -> Path:
        return self.warehouse / "lance"

    def lineage_dir(self, generation: str) -> Path:
        return self.warehouse / "lineage" / generation

    @property
    def lineage_root(self) -> Path:
        return self.warehouse / "lineage"

    def index_dir(self, generation: str) -> Path:
        return self.warehouse / "indexes" / generation

    @property
    def staging(self) -> Path:
        return self.warehouse / "staging"

    def parsed_dir(self, revision_id: str) -> Path:
        return self.staging / "parsed" / revision_id

    def chunks_cache(self, segmenter_id: str, revision_id: str) -> Path:
        return self.staging / "chunks" / segmenter_id / f"{revision_id}.parquet"

    def vectors_cache(self, space_id: str, segmenter_id: str, revision_id: str) -> Path:
        return self.staging / "vectors" / space_id / segmenter_id / f"{revision_id}.parquet"

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

    @property
    def reports(self) -> Path:
        return self.manifests / "reports"

    @property
    def queries(self) -> Path:
        return self.manifests / "queries"

    def ensure(self) -> "StoreLayout":
        for p in (self.blobs, self.lance, self.lineage_root, self.staging, self.generations,
                  self.reports, self.queries):
            p.mkdir(parents=True, exist_ok=True)
        return self
