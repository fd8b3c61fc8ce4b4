"""Promote and roll back: one atomic switch of the routing record, under the release lock.

The routing record names the generation and its embedding space together, and the query side
loads the encoder recorded in the generation's manifest, so index and encoder switch as one.
"""
from __future__ import annotations

from schemas.generation import SWITCH_ACTIONS, RoutingRecord
from tasks.store.integrity import verify_generation
from tasks.store.layout import StoreLayout
from tasks.store.lance_store import tagged_generations
from tasks.store.lineage_store import has_lineage
from tasks.store.manifests import list_generations, read_manifest
from tasks.store.routing import read_routing, switch_routing


class GenerationUnavailable(RuntimeError):
    """The generation does not exist, was retired, or its data is gone."""


class NothingToRollBack(GenerationUnavailable):
    """No generation served before the current one."""


def check_servable(layout: StoreLayout, generation: str, routing: RoutingRecord) -> None:
    if generation not in list_generations(layout):
        raise GenerationUnavailable(f"no generation {generation!r}; see `mabillon generations`")
    if generation in routing.retired:
        raise GenerationUnavailable(f"generation {generation} is retired and its data removed")
    if generation not in tagged_generations(layout) or not has_lineage(layout, generation):
        raise GenerationUnavailable(f"generation {generation} has no data in the warehouse (index or lineage missing)")
    verify_generation(layout, generation)  # CorruptGeneration: the serving one stays


def promote(layout: StoreLayout, generation: str, actor: str, reason: str = "",
            flow_run_id: str | None = None) -> RoutingRecord:
    """The caller holds the release lock (tasks.store.serialise)."""
    routing = read_routing(layout)
    check_servable(layout, generation, routing)
    if routing.serving == generation:
        return routing
    manifest = read_manifest(layout, generation)
    return switch_routing(layout, generation, manifest.space_id, "promote", actor, reason, flow_run_id)


def published_since(layout: StoreLayout, generation: str, routing: RoutingRecord) -> list[str]:
    """The generations that served everyone after `generation` was built, when what it was built
    on (its parent) no longer serves: what they brought is not in it, so serving it would take
    that out of service. Empty while its parent, or itself, serves."""
    manifest = read_manifest(layout, generation)
    if routing.serving in (manifest.parent, generation):
        return []
    since = [e.to_generation for e in routing.history
             if e.action in SWITCH_ACTIONS and e.at >= manifest.created_at
             and e.to_generation not in (manifest.parent, generation)]
    return list(dict.fromkeys(since)) or [routing.serving]


def since_words(generation: str, parent: str | None, since: list[str]) -> str:
    """"g0009 was published since g0008 was built on g0007" (the start of every warning)."""
    names, one = ", ".join(since), len(since) == 1
    return (f"{names} {'was' if one else 'were'} published since {generation} was built on "
            f"{parent or 'an empty home'}: what {'it' if one else 'they'} brought is not in {generation}")


def previously_serving(routing: RoutingRecord) -> str | None:
    """The generation that served before the current one (what `rollback` returns to)."""
    for event in reversed(routing.history):
        if event.action in SWITCH_ACTIONS and event.to_generation == routing.serving and event.from_generation:
            return event.from_generation
    return None


def rollback(layout: StoreLayout, actor: str, to: str | None = None, reason: str = "") -> RoutingRecord:
    """The caller holds the release lock (tasks.store.serialise)."""
    routing = read_routing(layout)
    target = to or previously_serving(routing)
    if target is None:
        raise NothingToRollBack("nothing served before the current generation; "
                                "name the generation to return to (--to GEN)")
    check_servable(layout, target, routing)
    manifest = read_manifest(layout, target)
    return switch_routing(layout, target, manifest.space_id, "rollback", actor, reason)
