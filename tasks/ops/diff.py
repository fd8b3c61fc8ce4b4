"""What changed between two generations: sources, counts, model and parser versions."""
from __future__ import annotations

from pydantic import BaseModel, Field

from schemas.generation import SourceDiff
from tasks.ops.generations import purged_sources
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table
from tasks.store.manifests import read_manifest


class GenerationDiff(BaseModel):
    a: str
    b: str
    sources: SourceDiff
    chunks: dict[str, int]
    vectors: dict[str, int]
    model: dict[str, str]
    space_id: dict[str, str]
    parsers: dict[str, dict[str, str]]
    segmenter: dict[str, str]
    # sources `a` held when it was published and lost since to a deletion's purge (they are in
    # `sources.removed` too: `a` held them, `b` does not)
    purged_since: list[str] = Field(default_factory=list)


def diff_generations(layout: StoreLayout, a: str, b: str) -> GenerationDiff:
    ma, mb = read_manifest(layout, a), read_manifest(layout, b)
    sa = read_lineage_table(layout, a, "sources", ["source_id", "current_revision_id"])
    sb = read_lineage_table(layout, b, "sources", ["source_id", "current_revision_id"])
    before = dict(zip(sa["source_id"].to_pylist(), sa["current_revision_id"].to_pylist()))
    after = dict(zip(sb["source_id"].to_pylist(), sb["current_revision_id"].to_pylist()))
    # A purge rewrites every retained generation, `a` included: what `a` held at publication and
    # `b` did not hold then is a removal even though neither holds it now.
    purged = sorted(set(purged_sources(layout, a)) - set(purged_sources(layout, b)) - set(after))
    return GenerationDiff(
        a=a, b=b,
        sources=SourceDiff(
            added=sorted(s for s in after if s not in before),
            changed=sorted(s for s in after if s in before and before[s] != after[s]),
            removed=sorted({*(s for s in before if s not in after), *purged}),
            unchanged=sorted(s for s in after if s in before and before[s] == after[s]),
        ),
        purged_since=purged,
        chunks={a: ma.counts.chunks, b: mb.counts.chunks},
        vectors={a: ma.counts.vectors, b: mb.counts.vectors},
        model={a: ma.embedding_space.model_name, b: mb.embedding_space.model_name},
        space_id={a: ma.space_id, b: mb.space_id},
        parsers={a: ma.parsers, b: mb.parsers},
        segmenter={a: ma.segmenter, b: mb.segmenter},
    )
