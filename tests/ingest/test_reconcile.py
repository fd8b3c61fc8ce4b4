"""Reconcile names each breach of the lineage invariants, and reports the source diff."""
import numpy as np
import pyarrow as pa

from schemas.embedding import EmbeddingSpace
from schemas.lineage import CHUNK_SCHEMA, PAGE_SCHEMA, REVISION_SCHEMA, SOURCE_SCHEMA
from tasks.ingest.reconcile import generation_digest, reconcile
from tasks.ingest.merge import StagedGeneration, empty_generation

SPACE = EmbeddingSpace(model_name="m", model_digest="d", dim=4, normalized=True, metric="cosine",
                       query_prefix="", document_prefix="", max_input_tokens=16, engine="test")


def _staged(n_docs: int = 2, chunks_per_doc: int = 2) -> StagedGeneration:
    sources, revisions, pages, chunks = [], [], [], []
    for d in range(n_docs):
        rev = f"r{d}"
        sources.append({"source_id": f"s{d}", "doc_id": f"doc{d}", "uri": "u", "corpus": "c", "tenant": "t",
                        "groups": ["g"], "current_revision_id": rev, "first_generation": "g0001"})
        revisions.append({"revision_id": rev, "source_id": f"s{d}", "doc_id": f"doc{d}", "uri": "u",
                          "corpus": "c", "date": None, "title": None, "tenant": "t", "groups": ["g"],
                          "digest": "x", "size": 1, "media_type": "text/plain", "acquired_at": None,
                          "metadata_json": "{}", "is_current": True})
        pages.append({"page_id": f"{rev}-p1", "revision_id": rev, "page_no": 1, "parser": "p",
                      "parser_version": "1", "raw_text": "texte", "normalized_text": "texte", "n_elements": 0})
        for i in range(chunks_per_doc):
            chunks.append({"chunk_id": f"{rev}-{i}", "revision_id": rev, "source_id": f"s{d}", "doc_id": f"doc{d}",
                           "corpus": "c", "tenant": "t", "groups": ["g"], "ordinal": i, "text": f"t{d}{i}",
                           "n_tokens": 1, "char_start": 0, "char_end": 1, "page_start": 1, "page_end": 1,
                           "spans_json": "[]", "segmenter": "s"})
    vectors = np.eye(4, dtype=np.float32)[np.arange(len(chunks)) % 4]
    return StagedGeneration(
        sources=pa.Table.from_pylist(sources, schema=SOURCE_SCHEMA),
        revisions=pa.Table.from_pylist(revisions, schema=REVISION_SCHEMA),
        pages=pa.Table.from_pylist(pages, schema=PAGE_SCHEMA), elements=empty_generation(SPACE).elements,
        chunks=pa.Table.from_pylist(chunks, schema=CHUNK_SCHEMA), vectors=vectors, space=SPACE)


def test_a_sound_generation_reconciles_with_counts_and_diff():
    staged = _staged()
    report = reconcile(staged, previous_sources=staged.sources.slice(0, 1))
    assert report.ok and report.counts.chunks == report.counts.vectors == 4
    assert report.diff.added == ["s1"] and report.diff.unchanged == ["s0"]


def test_a_chunk_without_a_vector_is_a_problem():
    staged = _staged()
    staged.vectors = staged.vectors[:-1]
    assert any("vectors" in p for p in reconcile(staged, None).problems)


def test_a_page_without_chunks_needs_a_recorded_reason():
    staged = _staged()
    keep = [r != "r1" for r in staged.chunks["revision_id"].to_pylist()]
    staged.chunks, staged.vectors = staged.chunks.filter(pa.array(keep)), staged.vectors[np.array(keep)]
    report = reconcile(staged, None)
    assert any("no chunks and no recorded reason" in p for p in report.problems)


def test_a_current_revision_without_pages_is_a_problem():
    staged = _staged()
    staged.pages = staged.pages.slice(0, 1)
    report = reconcile(staged, None)
    assert report.revisions_without_pages == ["r1"] and not report.ok


def test_tombstoned_documents_must_have_no_chunks():
    assert any("tombstoned" in p for p in reconcile(_staged(), None, tombstoned={"doc0"}).problems)


def test_the_digest_changes_with_any_text_or_vector():
    a, b = _staged(), _staged()
    assert generation_digest(a) == generation_digest(b)
    b.vectors = b.vectors.copy()
    b.vectors[0, 0] = 0.5
    assert generation_digest(a) != generation_digest(b)
