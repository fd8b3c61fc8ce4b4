"""Who may see what, now: the serving generation, the tombstones and the principal's policy,
re-read whenever the routing record or the tombstone list changes on disk.

A revision is visible to a principal when it is a current revision of the serving generation,
its document is not tombstoned, and the query side's own policy function (`allowed_mask`:
tenant, groups) admits it. Everything the reading room serves is checked against this set on
every request; nothing outside it is read, rendered or listed.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from schemas.retrieval import AccessDenied, Principal
from tasks.query.authorize import allowed_mask
from tasks.reading.catalog import Catalog
from tasks.store.layout import StoreLayout
from tasks.store.routing import read_routing
from tasks.store.tombstones import read_tombstones, tombstones_path

CATALOGS_KEPT = 2  # the serving generation and the one before a switch


@dataclass(frozen=True)
class Snapshot:
    """One consistent view of the current state, used for a whole request."""

    generation: str | None
    catalog: Catalog | None
    tombstones: frozenset[str]

    def visible(self, principal: Principal) -> frozenset[str]:
        """Revision ids the principal may see (empty when the principal can match nothing)."""
        if self.catalog is None:
            return frozenset()
        return _visible(self.catalog, self.tombstones, principal)


def _visible(catalog: Catalog, tombstones: frozenset[str], principal: Principal) -> frozenset[str]:
    key = (catalog.generation, tombstones, principal.tenant, tuple(sorted(principal.groups)))
    with _LOCK:
        if key in _VISIBLE:
            _VISIBLE.move_to_end(key)
            return _VISIBLE[key]
    try:
        mask = allowed_mask(catalog.access, principal, tombstones)
    except AccessDenied:  # a principal whose policy is unusable sees nothing
        mask = np.zeros(catalog.access.num_rows, dtype=bool)
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
    """The current snapshot, rebuilt only when the routing record or the tombstones change."""

    def __init__(self, layout: StoreLayout):
        self.layout = layout
        self._stamps: tuple | None = None
        self._snapshot = Snapshot(None, None, frozenset())
        self._catalogs: OrderedDict[str, Catalog] = OrderedDict()
        self._lock = threading.Lock()

    def snapshot(self) -> Snapshot:
        stamps = (_stamp(self.layout.routing), _stamp(tombstones_path(self.layout)))
        with self._lock:
            if stamps == self._stamps:
                return self._snapshot
            generation = read_routing(self.layout).serving
            tombstones = frozenset(read_tombstones(self.layout).doc_ids)
            catalog = self._catalog(generation) if generation else None
            self._snapshot = Snapshot(generation, catalog, tombstones)
            self._stamps = stamps
            return self._snapshot

    def _catalog(self, generation: str) -> Catalog:
        if generation not in self._catalogs:
            self._catalogs[generation] = Catalog.load(self.layout, generation)
        self._catalogs.move_to_end(generation)
        while len(self._catalogs) > CATALOGS_KEPT:
            self._catalogs.popitem(last=False)
        return self._catalogs[generation]
