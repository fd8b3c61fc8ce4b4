"""Canary: route named groups of principals to a candidate generation, everyone else stays.

A canary lives in the routing record (one atomic rename under the release lock, like every
switch); promotion and rollback end it (tasks.store.routing). Tombstones and validity apply to
the canary's generation as to any other, since they are applied to whichever generation answers.
"""
from __future__ import annotations

from datetime import datetime, timezone

from schemas.generation import Canary, RoutingRecord
from schemas.settings import MabillonSettings
from tasks.access.policy import is_safe_name
from tasks.access.principals import list_principals
from tasks.ops.switching import GenerationUnavailable, check_servable
from tasks.store.layout import StoreLayout
from tasks.store.manifests import read_manifest
from tasks.store.routing import end_canaries, read_routing, start_canary


class CanaryRefused(ValueError):
    """The canary cannot start as asked (unknown group, a group already in another canary)."""


def known_groups(settings: MabillonSettings) -> set[str]:
    """The groups some principal holds (principals.json and the default principal)."""
    return {g for p in list_principals(settings) for g in p.groups}


def plan_canary(routing: RoutingRecord, generation: str, groups: list[str], known: set[str],
                actor: str, reason: str, space_id: str) -> Canary:
    """The canary to write, or CanaryRefused / GenerationUnavailable saying why not."""
    wanted = sorted({g.strip() for g in groups if g and g.strip()})
    if not wanted:
        raise CanaryRefused("name at least one group to route to the candidate (e.g. --groups staff)")
    bad = [g for g in wanted if not is_safe_name(g)]
    if bad:
        raise CanaryRefused(f"invalid group names {bad}")
    unknown = [g for g in wanted if g not in known]
    if unknown:
        raise CanaryRefused(f"no principal holds group(s) {', '.join(unknown)}: the canary would reach "
                            f"nobody (groups held: {', '.join(sorted(known)) or 'none'})")
    if generation == routing.serving:
        raise CanaryRefused(f"{generation} already serves everyone; a canary routes a candidate")
    taken = {g: c.generation for c in routing.canaries if c.generation != generation for g in c.groups}
    clash = {g: taken[g] for g in wanted if g in taken}
    if clash:
        raise CanaryRefused("group(s) already in another canary: "
                            + ", ".join(f"{g} → {gen}" for g, gen in sorted(clash.items()))
                            + "; end that canary first")
    return Canary(generation=generation, space_id=space_id, groups=wanted, actor=actor, reason=reason,
                  since=datetime.now(timezone.utc))


def start(layout: StoreLayout, settings: MabillonSettings, generation: str, groups: list[str],
          actor: str, reason: str = "", flow_run_id: str | None = None) -> RoutingRecord:
    """Start (or change) the canary of `generation`; the caller holds the release lock.
    Nothing is written when anything is refused."""
    routing = read_routing(layout)
    check_servable(layout, generation, routing)
    canary = plan_canary(routing, generation, groups, known_groups(settings), actor, reason,
                         read_manifest(layout, generation).space_id)
    return start_canary(layout, canary, flow_run_id)


def stop(layout: StoreLayout, actor: str, reason: str = "", generation: str | None = None) -> RoutingRecord:
    """End the canary of `generation` (or all); the caller holds the release lock."""
    routing = read_routing(layout)
    if generation is not None and generation not in {c.generation for c in routing.canaries}:
        raise GenerationUnavailable(f"no canary routes to {generation}; see `mabillon generations`")
    return end_canaries(layout, actor, reason, generation)
