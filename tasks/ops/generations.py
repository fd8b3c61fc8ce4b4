"""The generations of a home as an operator reads them: which serves, which a canary serves to
some groups, which served before, which were never served, which gc removed, and what each holds
now (a purge of deleted documents changes that after publication; the manifest itself is never
rewritten)."""
from __future__ import annotations

from schemas.generation import SWITCH_ACTIONS, Counts, GenerationStatus, RoutingRecord
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import has_lineage, read_lineage_table
from tasks.store.manifests import list_generations, read_manifest, read_purges
from tasks.store.routing import read_routing


def purged_sources(layout: StoreLayout, generation: str) -> list[str]:
    return [s for record in read_purges(layout, generation) for s in record.sources_removed]


def current_counts(layout: StoreLayout, generation: str, published: Counts) -> Counts:
    """Counts read back from the lineage snapshot (ids only: cheap) after a purge."""
    def rows(table: str, column: str) -> int:
        return read_lineage_table(layout, generation, table, [column]).num_rows

    return Counts(sources=rows("sources", "source_id"), revisions=rows("revisions", "revision_id"),
                  pages=rows("pages", "page_id"), chunks=rows("chunks", "chunk_id"),
                  vectors=rows("vectors", "chunk_id") if published.vectors else 0)


def served_generations(routing: RoutingRecord) -> set[str]:
    """Generations that served everyone at some point (a canary or a gate event serves nobody new)."""
    switches = [e for e in routing.history if e.action in SWITCH_ACTIONS]
    return {e.to_generation for e in switches} | {e.from_generation for e in switches if e.from_generation}


def generation_statuses(layout: StoreLayout) -> list[GenerationStatus]:
    routing = read_routing(layout)
    served = served_generations(routing)
    canaries = {c.generation for c in routing.canaries}  # served to some groups only
    out = []
    for gen in list_generations(layout):
        m = read_manifest(layout, gen)
        kept = gen not in routing.retired and has_lineage(layout, gen)
        status = ("serving" if gen == routing.serving else "canary" if gen in canaries else
                  "retired" if gen in served or not kept else "staged")
        purged = purged_sources(layout, gen)
        counts, at_publish = m.counts, None
        if purged and kept:
            counts, at_publish = current_counts(layout, gen, m.counts), m.counts
        out.append(GenerationStatus(generation=gen, status=status, created_at=m.created_at,
                                    counts=counts, parent=m.parent, served=gen in served,
                                    data_kept=kept, pinned=gen in routing.pinned,
                                    purged_sources=len(purged), counts_at_publish=at_publish))
    return out
