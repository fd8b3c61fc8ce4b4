"""Release records under manifests/releases/: one YAML file per decision, never rewritten."""
from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

from schemas.release import ReleaseRecord
from tasks.store.atomic import atomic_write_text
from tasks.store.layout import StoreLayout


def manifest_sha256(layout: StoreLayout, generation: str) -> str:
    """Digest of the manifest file as written (it is immutable, so the digest pins it)."""
    return hashlib.sha256(layout.manifest_path(generation).read_bytes()).hexdigest()


def write_release_record(layout: StoreLayout, record: ReleaseRecord) -> Path:
    """`<generation>-<n>.yaml`, n counting the decisions on that generation. The caller holds
    the release lock, so two writers never pick the same n."""
    layout.releases.mkdir(parents=True, exist_ok=True)
    n = len(list(layout.releases.glob(f"{record.generation}-*.yaml"))) + 1
    path = layout.releases / f"{record.generation}-{n}.yaml"
    atomic_write_text(path, yaml.safe_dump(record.model_dump(mode="json"), sort_keys=False,
                                           allow_unicode=True))
    return path


def read_release_records(layout: StoreLayout, generation: str | None = None) -> list[ReleaseRecord]:
    if not layout.releases.exists():
        return []
    paths = sorted(layout.releases.glob(f"{generation or 'g*'}-*.yaml"),
                   key=lambda p: (p.stem.rsplit("-", 1)[0], int(p.stem.rsplit("-", 1)[1])))
    return [ReleaseRecord.model_validate(yaml.safe_load(p.read_text("utf-8"))) for p in paths]
