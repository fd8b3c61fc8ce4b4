"""Who may see what, now: the generation routed to the principal (a canary's, or the serving
one), the tombstones and the principal's policy, re-read whenever the routing record or the
tombstone list changes on disk.

A revision is visible to a principal when it is a current revision of the principal's routed
generation, its document is not tombstoned (on every route at once), the access policy the
query side applies too (tasks.access.policy: tenant, groups) admits it, and the time of the
request — or the `as_of` it names — is inside the revision's validity interval
(tasks.access.validity), so an embargo ends by itself. Everything the reading room serves is checked against this set on
every request; nothing outside it is read, rendered or listed.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from schemas.retrieval import AccessDenied, Principal
from tasks.access.policy import AccessPolicy
from tasks.access.validity import now_utc
from tasks.reading.catalog import Catalog
from tasks.store.layout import StoreLayout
from tasks.store.routing import read_routing
from tasks.store.tombstones import read_tombstones, tombstones_path

CATALOGS_KEPT = 3  # the serving generation, a canary's, and the one before a switch


@dataclass(frozen=True)
class Snapshot:
    """One consistent view of the current state, used for a whole request."""

    generation: str | None
    catalog: Catalog | None
    tombstones: frozenset[str]
    route: str = "serving"  # serving | canary: how this generation was chosen for the viewer

    def visible(self, principal: Principal, at: datetime | None = None) -> frozenset[str]:
        """Revision ids the principal may see at `at` (default: now); empty when the principal
        can match nothing."""
        if self.catalog is None:
            return frozenset()
        return _visible(self.catalog, self.tombstones, principal, at or now_utc())


def _visible(catalog: Catalog, tombstones: frozenset[str], principal: Principal,
             at: datetime) -> frozenset[str]:
    # within one span between validity bounds the set cannot change: the span is the key
    span = catalog.validity.span_at(at) if catalog.validity.bounded else None
    key = (catalog.generation, tombstones, principal.tenant, tuple(sorted(principal.groups)), span)
    with _LOCK:
        if key in _VISIBLE:
            _VISIBLE.move_to_end(key)
            return _VISIBLE[key]
    try:
        mask = AccessPolicy(principal, tombstones).mask(catalog.access, catalog.access_classes)
    except AccessDenied:  # a principal whose policy is unusable sees nothing
        mask = np.zeros(catalog.access.num_rows, dtype=bool)
    valid = catalog.validity.mask_at(at)
    if valid is not None:
        mask = mask & valid
    ids = catalog.access.column("revision_id").to_numpy(zero_copy_only=False)
    visible = frozenset(ids[mask].tolist())
    with _LOCK:
        _VISIBLE[key] = visible
        while len(_VISIBLE) > 256:
            _VISIBLE.popitem(last=False)
    return visible


_VISIBLE: OrderedDict = OrderedDict()
_LOCK = threading.Lock()


def _stamp(path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


class ServingState:
    """The current routing and tombstones, re-read only when their files change; one snapshot
    per routed generation."""

    def __init__(self, layout: StoreLayout):
        self.layout = layout
        self._stamps: tuple | None = None
        self._routing = None
        self._tombstones: frozenset[str] = frozenset()
        self._snapshots: dict[str, Snapshot] = {}
        self._catalogs: OrderedDict[str, Catalog] = OrderedDict()
        self._lock = threading.Lock()

    def snapshot(self, principal: Principal | None = None) -> Snapshot:
        """The snapshot of the generation routed to `principal` (the serving one without)."""
        stamps = (_stamp(self.layout.routing), _stamp(tombstones_path(self.layout)))
        with self._lock:
            if stamps != self._stamps:
                self._routing = read_routing(self.layout)
                self._tombstones = frozenset(read_tombstones(self.layout).doc_ids)
                self._snapshots = {}
                self._stamps = stamps
            routing = self._routing
            route = (routing.route_for(principal.groups) if principal is not None
                     else (None if routing.serving is None else routing.route_for([])))
            if route is None:
                return Snapshot(None, None, self._tombstones)
            if route.generation not in self._snapshots:
                self._snapshots[route.generation] = Snapshot(
                    route.generation, self._catalog(route.generation), self._tombstones, route.route)
            return self._snapshots[route.generation]

    def version(self) -> tuple | None:
        """Changes whenever the routing record or the tombstones do (read after `snapshot`)."""
        return self._stamps

    def live_revisions(self) -> set[str]:
        """Revisions of every generation some route serves now, minus tombstoned documents."""
        with self._lock:
            routing, tombstones = self._routing, self._tombstones
        if routing is None:
            return set()
        generations = {g for g in [routing.serving, *(c.generation for c in routing.canaries)] if g}
        live = set()
        for generation in generations:
            with self._lock:
                catalog = self._catalog(generation)
            live |= {r for r, info in catalog.revisions.items() if info.doc_id not in tombstones}
        return live

    def _catalog(self, generation: str) -> Catalog:
        if generation not in self._catalogs:
            self._catalogs[generation] = Catalog.load(self.layout, generation)
        self._catalogs.move_to_end(generation)
        while len(self._catalogs) > CATALOGS_KEPT:
            self._catalogs.popitem(last=False)
        return self._catalogs[generation]
