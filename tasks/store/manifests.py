"""Generation manifests: one YAML file each, written once, never modified; and the purge records
beside them (`<g>.purges.yaml`), the amendments a physical purge makes to what a generation holds."""
from __future__ import annotations

import re

import yaml

from schemas.generation import GenerationManifest, PurgeRecord
from tasks.store.atomic import atomic_write_text
from tasks.store.layout import StoreLayout

GENERATION_PATTERN = re.compile(r"^g(\d{4,})$")


def write_manifest(layout: StoreLayout, manifest: GenerationManifest) -> str:
    path = layout.manifest_path(manifest.generation)
    if path.exists():
        raise FileExistsError(f"manifest {path} exists; generations are immutable")
    atomic_write_text(path, yaml.safe_dump(manifest.model_dump(mode="json"), sort_keys=False,
                                           allow_unicode=True))
    return str(path)


def read_manifest(layout: StoreLayout, generation: str) -> GenerationManifest:
    path = layout.manifest_path(generation)
    if not path.exists():
        raise KeyError(f"no generation {generation!r} (no manifest at {path})")
    return GenerationManifest.model_validate(yaml.safe_load(path.read_text("utf-8")))


def list_generations(layout: StoreLayout) -> list[str]:
    if not layout.generations.exists():
        return []
    names = [p.stem for p in layout.generations.glob("g*.yaml") if GENERATION_PATTERN.match(p.stem)]
    return sorted(names, key=lambda g: int(g[1:]))


def next_generation_id(layout: StoreLayout, taken: list[str]) -> str:
    """Sequential ids; `taken` also lists ids left behind by runs killed before their manifest."""
    numbers = [int(m.group(1)) for g in [*list_generations(layout), *taken]
               if (m := GENERATION_PATTERN.match(g))]
    return f"g{(max(numbers) + 1) if numbers else 1:04d}"


def read_purges(layout: StoreLayout, generation: str) -> list[PurgeRecord]:
    """The purges recorded for a generation, oldest first (none when it was never purged)."""
    path = layout.purges_path(generation)
    if not path.exists():
        return []
    return [PurgeRecord.model_validate(e) for e in yaml.safe_load(path.read_text("utf-8")) or []]


def append_purge(layout: StoreLayout, generation: str, record: PurgeRecord) -> None:
    """Add a purge record (the caller holds the release lock: no two purges race)."""
    records = [*read_purges(layout, generation), record]
    atomic_write_text(layout.purges_path(generation),
                      yaml.safe_dump([r.model_dump(mode="json") for r in records], allow_unicode=True))
