"""A generation opened for queries: the one place that reads what serving it takes.

In order: the routing record (which generation answers this principal: a canary's, the serving
one, or the one asked for), its manifest, the integrity of its files (a torn or changed file
refuses the generation, never serves), the tombstone list (it lives outside any generation, so
a rollback cannot resurrect a deletion), the query encoder the generation was embedded with,
and its LanceDB version. Nothing here writes: the query side reads a published generation as
it is, and what is missing from it is rebuilt only by an operator (`mabillon reindex`).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from schemas.generation import GenerationManifest
from schemas.settings import EmbeddingSettings, MabillonSettings
from tasks.store.integrity import verify_once
from tasks.store.lance_store import open_generation_table, serving_session
from tasks.store.layout import StoreLayout
from tasks.store.location import Location
from tasks.store.manifests import read_manifest
from tasks.store.routing import read_routing
from tasks.store.tombstones import read_tombstones


class NoServingGeneration(LookupError):
    """Nothing has been published yet, so there is nothing to search."""


@dataclass(frozen=True)
class ServingGeneration:
    """What a retriever is opened on: one published generation as it stands for one principal."""

    generation: str
    route: Literal["serving", "canary", "requested"]  # how this generation was chosen
    layout: StoreLayout
    manifest: GenerationManifest
    excluded_doc_ids: tuple[str, ...]  # tombstoned documents (or the caller's list)
    encoder: EmbeddingSettings  # the query encoder to load: the generation's, unless configured
    table: object  # the generation's LanceDB table, checked out at its tagged version

    @property
    def index_dir(self) -> Location:
        return self.layout.index_dir(self.generation)


def encoder_choice(settings: EmbeddingSettings, manifest: GenerationManifest) -> EmbeddingSettings:
    """The encoder follows the generation (promotion and rollback switch both together); an
    encoder configured explicitly is kept, and must then match it (the caller checks)."""
    if "model" in settings.model_fields_set:
        return settings
    return settings.model_copy(update={"model": manifest.embedding_model})


def open_serving(settings: MabillonSettings, groups: list[str], generation: str | None = None,
                 excluded_doc_ids: Iterable[str] | None = None) -> ServingGeneration:
    """The generation routed to a principal of `groups` (a canary's, or the serving one), or
    `generation`; `excluded_doc_ids` defaults to the tombstone list.

    Raises NoServingGeneration when nothing serves, KeyError for an unknown generation and
    CorruptGeneration when its files differ from what was published."""
    layout = StoreLayout.from_settings(settings)
    routed = None if generation else read_routing(layout).route_for(groups)
    gen = generation or (routed.generation if routed else None)
    if gen is None:
        raise NoServingGeneration(f"no generation serves under {layout.manifests}; "
                                  "run `mabillon ingest` first")
    manifest = read_manifest(layout, gen)
    verify_once(layout, gen)
    excluded = read_tombstones(layout).doc_ids if excluded_doc_ids is None else excluded_doc_ids
    table = open_generation_table(layout, gen, serving_session(settings.index.cache_mb))
    return ServingGeneration(generation=gen, route=routed.route if routed else "requested",
                             layout=layout, manifest=manifest, excluded_doc_ids=tuple(excluded),
                             encoder=encoder_choice(settings.embedding, manifest), table=table)
