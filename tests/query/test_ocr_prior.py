"""The OCR-quality prior: off by default, and when set it moves a noisy document below an
otherwise equal clean one (fusion alone and through the warm start)."""
from __future__ import annotations

import json

import lancedb
import pyarrow as pa
import pytest

from schemas.lineage import chunk_table_schema
from schemas.retrieval import FusedHit, RetrievalSettings
from tasks.query.fusion import ocr_prior
from tests.query.conftest import DIM, make_retriever, toy_vector


def fused(*docs: tuple[str, float]) -> list[FusedHit]:
    return [FusedHit(doc_id=d, fused_score=s, rank=n, ranks={}, best_chunk_id=f"{d}#0",
                     corpus="c", date=None) for n, (d, s) in enumerate(docs, start=1)]


def test_the_prior_puts_the_cleaner_of_two_equal_hits_first():
    hits = fused(("noisy", 0.02), ("clean", 0.02))
    quality = {"noisy": 0.4, "clean": 0.95}
    out = ocr_prior(hits, lambda h: quality[h.doc_id], weight=1.0, k=60)
    assert [h.doc_id for h in out] == ["clean", "noisy"]
    assert [h.rank for h in out] == [1, 2]
    assert out[1].fused_score == pytest.approx(0.02 - 0.6 / 61)


def test_weight_zero_and_unknown_quality_change_nothing():
    hits = fused(("noisy", 0.02), ("clean", 0.02))
    quality = {"noisy": 0.4, "clean": 0.95}
    assert ocr_prior(hits, lambda h: quality[h.doc_id], weight=0.0) == hits
    # unknown quality costs nothing: a known perfect score only ties with it, order kept
    unknown = ocr_prior(hits, lambda h: None if h.doc_id == "noisy" else 1.0, weight=5.0)
    assert [h.doc_id for h in unknown] == ["noisy", "clean"]


def test_a_small_weight_does_not_overturn_a_clear_lead():
    hits = fused(("noisy", 0.030), ("clean", 0.016))
    out = ocr_prior(hits, lambda h: {"noisy": 0.5, "clean": 1.0}[h.doc_id], weight=0.5, k=60)
    assert [h.doc_id for h in out] == ["noisy", "clean"]


# through the warm start: two documents with the same text, one badly OCRed ------------------
TEXT = "Le budget de la guerre est voté par la Chambre."


def twin_table(with_quality: bool) -> pa.Table:
    rows = []
    for doc_id, quality in (("aa-noisy", 0.3), ("zz-clean", 0.98), ("other", 0.9)):
        text = TEXT if doc_id != "other" else "Obsèques de M. Paul Bert samedi."
        rows.append({
            "chunk_id": f"{doc_id}#0", "revision_id": f"r-{doc_id}", "source_id": f"s-{doc_id}",
            "doc_id": doc_id, "corpus": "journal_officiel", "date": "1887-01-11", "tenant": "t1",
            "groups": ["public"], "ordinal": 0, "text": text, "n_tokens": len(text.split()),
            "char_start": 0, "char_end": len(text), "page_start": 1, "page_end": 1,
            "spans_json": json.dumps([]), "segmenter": "toy", "vector": toy_vector(text).tolist(),
            "ocr_quality": quality if with_quality else None,
            "ocr_quality_source": "estimated" if with_quality else None,
        })
    return pa.Table.from_pylist(rows, schema=chunk_table_schema(DIM))


@pytest.fixture()
def twins(tmp_path):
    def open_(with_quality: bool, name: str):
        table = twin_table(with_quality)
        lance = lancedb.connect(str(tmp_path / name)).create_table("chunks", table)
        return lance, table
    return open_


def order(retriever) -> list[str]:
    return [h.doc_id for h in retriever.warm_start("budget de la guerre", k=3)]


def test_the_setting_moves_the_noisy_twin_below_the_clean_one(twins):
    lance, table = twins(True, "q")
    assert make_retriever(lance, table).view.ocr_quality_of("aa-noisy#0") == pytest.approx(0.3)
    assert order(make_retriever(lance, table))[:2] == ["aa-noisy", "zz-clean"]  # channel ties: row order
    assert order(make_retriever(lance, table, ocr_weight=1.0))[:2] == ["zz-clean", "aa-noisy"]


def test_off_by_default_ranking_is_what_it_is_without_any_quality(twins, tmp_path):
    assert RetrievalSettings().ocr_weight == 0.0
    with_q, without_q = twins(True, "q"), twins(False, "n")
    plain = make_retriever(*without_q)
    assert plain.view.ocr_quality_of("aa-noisy#0") is None  # nulls are unknown, not 0
    default = make_retriever(*with_q)
    a, b = default.warm_start("budget de la guerre", k=3), plain.warm_start("budget de la guerre", k=3)
    assert [(h.doc_id, h.fused_score) for h in a] == [(h.doc_id, h.fused_score) for h in b]
    # a generation published before the column: nothing to read, the setting changes nothing
    old = twin_table(False).drop_columns(["ocr_quality", "ocr_quality_source"])
    lance = lancedb.connect(str(tmp_path / "old")).create_table("chunks", old)
    before_column = make_retriever(lance, old, ocr_weight=2.0)
    assert before_column.view.ocr_quality is None
    assert order(before_column) == [h.doc_id for h in b]
