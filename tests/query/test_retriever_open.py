"""Retriever.open against a real store layout: serving generation, space check, index cache."""
from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pytest

from schemas.embedding import EmbeddingSpace, EmbeddingSpaceMismatch
from schemas.generation import Counts, GenerationManifest, SourceDiff, RunCounts
from schemas.settings import EmbeddingSettings, MabillonSettings
from tasks.query.retriever import Retriever
from tasks.store.serving import NoServingGeneration
from tests.query.conftest import PUBLIC, chunk_table


def publish(settings: MabillonSettings, table: pa.Table, space: EmbeddingSpace, gen="g0001"):
    from tasks.store.lance_store import write_generation_table
    from tasks.store.layout import StoreLayout
    from tasks.store.manifests import write_manifest
    from tasks.store.routing import switch_routing

    layout = StoreLayout.from_settings(settings).ensure()
    version = write_generation_table(layout, gen, table)
    write_manifest(layout, GenerationManifest(
        generation=gen, created_at=datetime.now(timezone.utc), parent=None,
        embedding_space=space, space_id=space.space_id, lance_table="chunks",
        lance_version=version, lance_tag=gen, lineage_dir=str(layout.lineage_dir(gen)),
        counts=Counts(chunks=table.num_rows), digest="x", diff=SourceDiff(), run=RunCounts(),
        segmenter="toy"))
    switch_routing(layout, gen, space.space_id, "publish", "test")
    return layout


def padded_chunk_table(dim: int) -> pa.Table:
    """The toy table's vectors have the toy dimension; give them the model's by padding."""
    table = chunk_table()
    vecs = [v + [0.0] * (dim - len(v)) for v in table.column("vector").to_pylist()]
    return table.set_column(table.schema.get_field_index("vector"), "vector",
                            pa.array(vecs, pa.list_(pa.float32(), dim)))


@pytest.fixture(scope="module")
def minilm_space() -> EmbeddingSpace:
    from tasks.embedding import load_embedder

    return load_embedder(EmbeddingSettings(model="minilm")).space


def test_open_refuses_a_generation_of_another_embedding_space(tmp_path, minilm_space):
    settings = MabillonSettings(home=tmp_path)
    other = minilm_space.model_copy(update={"model_name": "someone/else", "model_digest": "0" * 64})
    publish(settings, chunk_table(), other)
    with pytest.raises(EmbeddingSpaceMismatch, match="MABILLON_EMBEDDING__MODEL"):
        Retriever.open(settings, PUBLIC)


def test_open_without_a_serving_generation_says_to_ingest(tmp_path):
    with pytest.raises(NoServingGeneration, match="ingest"):
        Retriever.open(MabillonSettings(home=tmp_path), PUBLIC)


def test_open_serves_the_routed_generation_without_writing_into_it(tmp_path, minilm_space):
    from tasks.ops.reindex import reindex_lexical
    from tasks.query.searchable import drop_caches

    settings = MabillonSettings(home=tmp_path)
    layout = publish(settings, padded_chunk_table(minilm_space.dim), minilm_space)
    r = Retriever.open(settings, PUBLIC)
    assert r.generation == "g0001" and r.space_id == minilm_space.space_id
    found = [h.doc_id for h in r.bm25_docs("Floquet président")]
    assert found[0] in {"jo-2", "gau-1"}
    assert len(r.dense_chunks("Floquet", k=3)) == 3
    # published without a lexical index: served from a scratch copy, the generation untouched
    assert layout.index_dir("g0001").children() == []
    assert r.index_flags == []
    built = reindex_lexical(layout, "g0001", settings.retrieval)  # the operator's command
    assert [loc.name for loc in layout.index_dir("g0001").children()] == [built.path]
    drop_caches("g0001")
    assert [h.doc_id for h in Retriever.open(settings, PUBLIC).bm25_docs("Floquet président")] == found


def test_open_applies_the_tombstone_list(tmp_path, minilm_space):
    from tasks.store.tombstones import add_tombstones

    settings = MabillonSettings(home=tmp_path)
    layout = publish(settings, padded_chunk_table(minilm_space.dim), minilm_space)
    add_tombstones(layout, ["jo-2"], "test", "rights")
    r = Retriever.open(settings, PUBLIC)
    assert "jo-2" not in {h.doc_id for h in r.bm25_docs("Floquet président", k=20)}
    assert "jo-2" not in {h.doc_id for h in r.dense_docs("Floquet président", k=20)}
