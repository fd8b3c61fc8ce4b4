"""The index contract end to end: what publish records, what a query does when an index is
missing or unreadable, exact substring search without texts in memory, BM25 from disk equal to
the in-memory reference."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from flows.release import release
from schemas.indexes import IndexSettings, IndexUnavailable, search_defaults
from schemas.retrieval import Principal
from schemas.settings import LlmSettings
from tasks.llm.registry import make_provider
from tasks.index.analyzer import analyze
from tasks.index.lexical_build import build_index
from tasks.index.postings import PostingsIndex
from tasks.query.loop import answer_question
from tasks.query.retriever import Retriever
from tasks.query.searchable import drop_caches
from tasks.index.analyzer import normalize
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_source_diff
from tasks.store.location import open_location
from tasks.store.manifests import read_manifest
from tests.query.reference_bm25 import Bm25Index
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records
from tests.query.conftest import PUBLIC as TOY_READER, make_retriever

PUBLIC = Principal(principal_id="default", tenant="default", groups=["public"])
FORCED = IndexSettings(ann_min_rows=0, exact_below_allowed=0)
QUESTION = "débat sur les blés renvoyé à jeudi"


@pytest.fixture(scope="module")
def ann_home(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ann")
    home = root / "home"
    home.mkdir()
    release(paths=[str(write_records(root / "a.jsonl", SAMPLE_RECORDS))],
            settings=settings_for(home, index=FORCED))
    return home


@pytest.fixture
def home_copy(ann_home: Path, tmp_path: Path) -> Path:
    drop_caches()
    copy = tmp_path / "home"
    shutil.copytree(ann_home, copy)
    yield copy
    drop_caches()


def test_the_manifest_records_how_the_generation_is_searched_and_stays_small(ann_home: Path):
    layout = StoreLayout.from_settings(settings_for(ann_home))
    manifest = read_manifest(layout, "g0001")
    dense, lexical = manifest.indexes.dense, manifest.indexes.lexical
    assert dense.search == "ann" and dense.algorithm == "IVF_RQ" and dense.build_s > 0
    assert set(dense.params) == {"num_partitions"}
    assert lexical.statistics == "allowed-rows" and lexical.rows == manifest.counts.chunks
    assert lexical.char_ngrams == 4 and lexical.build_s > 0
    # the per-source diff lives in Parquet beside the lineage; the manifest keeps counts
    text = layout.manifest_path("g0001").read_text("utf-8")
    diff = read_source_diff(layout, "g0001")
    assert manifest.diff.added == len(diff.added) == len(SAMPLE_RECORDS) and manifest.diff.digest
    assert not any(sid in text for sid in diff.added)
    assert yaml.safe_load(text)["indexes"]["dense"]["algorithm"] == "IVF_RQ"


def test_an_exact_generation_below_the_threshold_records_exact_search(tmp_path: Path, home: Path):
    settings = settings_for(home)  # default threshold: far above a sample
    release(paths=[str(write_records(tmp_path / "a.jsonl", SAMPLE_RECORDS[:2]))], settings=settings)
    contract = read_manifest(StoreLayout.from_settings(settings), "g0001").indexes
    assert contract.dense.search == "exact" and contract.dense.algorithm is None
    assert not Retriever.open(settings, PUBLIC).dense_plan.ann


def _lexical_folder(home: Path) -> Path:
    return next((home / "warehouse" / "indexes" / "g0001").glob("lexical-*"))


def test_a_missing_lexical_index_is_refused_naming_the_generation(home_copy: Path):
    shutil.rmtree(_lexical_folder(home_copy))
    settings = settings_for(home_copy, index=FORCED.model_copy(update={"on_missing": "error"}))
    with pytest.raises(IndexUnavailable, match="generation g0001: lexical index"):
        Retriever.open(settings, PUBLIC).bm25_docs(QUESTION)


def test_an_unreadable_lexical_index_is_served_exactly_flagged_and_left_to_the_operator(home_copy: Path):
    settings = settings_for(home_copy, index=FORCED)
    before = [h.doc_id for h in Retriever.open(settings, PUBLIC).bm25_docs(QUESTION)]
    drop_caches()
    torn = _lexical_folder(home_copy) / "rows.bin"
    torn.write_bytes(b"\0" * 7)
    r = Retriever.open(settings, PUBLIC)
    assert [h.doc_id for h in r.bm25_docs(QUESTION)] == before
    assert r.index_flags == ["lexical_index_rebuilt"]
    assert torn.read_bytes() == b"\0" * 7  # the query side wrote nothing into the generation
    again = Retriever.open(settings, PUBLIC)  # the same process: its scratch copy, flagged again
    assert [h.doc_id for h in again.bm25_docs(QUESTION)] == before
    assert again.index_flags == ["lexical_index_rebuilt"]


def test_reindex_rebuilds_a_torn_lexical_index_in_place(home_copy: Path, capsys):
    from flows.cli.main import main

    settings = settings_for(home_copy, index=FORCED)
    before = [h.doc_id for h in Retriever.open(settings, PUBLIC).bm25_docs(QUESTION)]
    drop_caches()
    torn = _lexical_folder(home_copy) / "rows.bin"
    torn.write_bytes(b"\0" * 7)
    assert main(["reindex", "g0001", "--home", str(home_copy)]) == 0
    assert "g0001: lexical index lexical-" in capsys.readouterr().out
    assert torn.stat().st_size > 7
    r = Retriever.open(settings, PUBLIC)
    assert [h.doc_id for h in r.bm25_docs(QUESTION)] == before and r.index_flags == []
    assert main(["reindex", "g9999", "--home", str(home_copy)]) != 0  # an unknown generation



def _big_toy_table(copies: int = 80):
    """The toy chunks copied under new ids (640 rows), vectors jittered: enough rows to train
    IVF_PQ with several partitions, so the search really goes through the index."""
    import pyarrow as pa

    from tests.query.conftest import chunk_table

    base = chunk_table()
    rng = np.random.default_rng(3)
    parts = []
    for n in range(copies):
        vec = np.asarray(base.column("vector").to_pylist(), np.float32)
        vec += rng.normal(0, 0.05, vec.shape).astype(np.float32)
        vec /= np.linalg.norm(vec, axis=1, keepdims=True)
        t = base.set_column(0, "chunk_id", pa.array([f"{c}~{n}" for c in base.column("chunk_id").to_pylist()]))
        t = t.set_column(t.schema.get_field_index("doc_id"), "doc_id",
                         pa.array([f"{d}~{n}" for d in base.column("doc_id").to_pylist()]))
        parts.append(t.set_column(t.schema.get_field_index("vector"), "vector",
                                  pa.array(vec.tolist(), base.schema.field("vector").type)))
    return pa.concat_tables(parts)


def _ann_table(path: Path):
    import lancedb

    from tasks.index.dense_build import build_dense

    table = _big_toy_table()
    lt = lancedb.connect(str(path)).create_table("chunks", table)
    dense = build_dense(lt, table.num_rows, IndexSettings(ann_min_rows=0, num_partitions=4))
    return table, dense


def test_an_unreadable_vector_index_serves_exact_search_with_a_flag_in_the_evidence(tmp_path: Path):
    import lancedb

    from tasks.index.dense_search import DensePlan

    table, dense = _ann_table(tmp_path / "lance")
    assert dense.search == "ann" and dense.params["num_partitions"] == 4
    plan = DensePlan(ann=True, nprobes=2, refine_factor=2)
    lt = lancedb.connect(str(tmp_path / "lance")).open_table("chunks")
    r = make_retriever(lt, table)
    exact = [h.chunk_id for h in r.dense_chunks("Floquet président de la Chambre", k=5)]
    query = lt.search(np.ones(64, np.float32)).where("tenant = 't1'", prefilter=True).nprobes(2)
    assert "ANN" in query.explain_plan(True) or "IVF" in query.explain_plan(True).upper()
    uuid = next(i.index_uuid for i in lt.list_indices() if i.name == dense.name)
    files = [p for p in (tmp_path / "lance" / "chunks.lance" / "_indices" / uuid).rglob("*") if p.is_file()]
    assert files
    for f in files:
        f.write_bytes(b"not an index")  # the ANN index only; the scalar indexes stay sound
    fresh = lancedb.connect(str(tmp_path / "lance")).open_table("chunks")
    r = make_retriever(fresh, table)
    r.search.dense_plan = plan
    assert [h.chunk_id for h in r.dense_chunks("Floquet président de la Chambre", k=5)] == exact
    assert r.index_flags == ["dense_index_unreadable_exact_search"]
    package = answer_question(r, "Floquet président de la Chambre", make_provider(LlmSettings(provider="rules")),
                              settings_for(tmp_path).query)
    assert "dense_index_unreadable_exact_search" in package.flags
    refusing = make_retriever(lancedb.connect(str(tmp_path / "lance")).open_table("chunks"), table)
    refusing.search.dense_plan, refusing.search.index_settings = plan, IndexSettings(on_missing="error")
    with pytest.raises(IndexUnavailable, match="generation g0001: its vector index cannot be read"):
        refusing.dense_chunks("Floquet président de la Chambre", k=5)


def test_ann_prefilter_returns_the_k_best_allowed_rows_at_every_selectivity(tmp_path: Path):
    import lancedb

    from tasks.index.dense_search import DensePlan

    table, dense = _ann_table(tmp_path / "lance")
    lt = lancedb.connect(str(tmp_path / "lance")).open_table("chunks")
    for principal in (TOY_READER, Principal(principal_id="x", tenant="t2", groups=["public"]),
                      Principal(principal_id="c", tenant="t1", groups=["comite-secret"])):
        ann, exact = make_retriever(lt, table, principal=principal), make_retriever(lt, table, principal=principal)
        # one probe of four partitions when every row is allowed: more under a narrower filter
        # (re-ranked as served: RaBitQ's one-bit codes alone rank coarsely)
        ann.search.dense_plan = DensePlan(ann=True, nprobes=1, refine_factor=search_defaults(dense.algorithm, None, None)[1],
                                   partitions=4, rows=dense.rows)
        allowed = int(ann.allowed.sum())
        hits = ann.dense_chunks("Floquet président budget", k=20)
        assert len(hits) == min(20, allowed)  # k allowed rows even when one partition holds fewer
        assert all(ann.allowed[ann.view.row_of(h.chunk_id)] for h in hits)
        truth = {h.chunk_id for h in exact.dense_chunks("Floquet président budget", k=20)}
        assert len(truth & {h.chunk_id for h in hits}) >= 0.5 * len(truth)


def test_the_index_probes_the_planned_partitions_and_fetches_ids_and_distances_only(tmp_path: Path):
    import re

    import lancedb

    from tasks.index.dense_search import DensePlan, vector_query

    table, dense = _ann_table(tmp_path / "lance")
    lt = lancedb.connect(str(tmp_path / "lance")).open_table("chunks")
    plan = DensePlan(ann=True, nprobes=1, refine_factor=1, partitions=4, rows=dense.rows)
    vector = np.ones(64, np.float32) / 8.0
    for widen, probed in ((False, "1"), (True, "4")):
        query = vector_query(lt, vector, "tenant = 't1'", 5, plan, dense.rows, widen=widen)
        assert re.findall(r"partitions_searched=(\d+)", query.analyze_plan()) == [probed]
        assert query.to_arrow().column_names == ["_distance", "_rowid"]


def test_a_dense_search_names_the_columns_it_reads_so_lance_warns_of_nothing(tmp_path: Path, capfd):
    """LanceDB 0.40 adds `_distance` to a projection that lacks it, with a deprecation warning
    on stderr at every search (a served process would log one per question); a later release
    stops adding it, and the similarities would go missing."""
    import lancedb

    from tasks.index.dense_search import DensePlan, search, vector_query

    table, dense = _ann_table(tmp_path / "lance")
    lt = lancedb.connect(str(tmp_path / "lance")).open_table("chunks")
    vector = np.ones(64, np.float32) / 8.0
    capfd.readouterr()
    for plan in (DensePlan(), DensePlan(ann=True, nprobes=1, refine_factor=1, partitions=4, rows=dense.rows)):
        # asked for, not added by LanceDB (the warning below shows only where its log is on)
        query = vector_query(lt, vector, "tenant = 't1'", 5, plan, dense.rows)
        assert query.to_query_object().columns == ["_rowid", "_distance"]
        row_ids, sims = search(lt, vector, "tenant = 't1'", 5, plan, dense.rows)
        assert row_ids.size == 5 and np.all(np.diff(sims) <= 1e-6)
    assert "Deprecation" not in capfd.readouterr().err


def test_ann_results_are_the_best_allowed_rows(ann_home: Path):
    settings = settings_for(ann_home, index=FORCED)
    ann = Retriever.open(settings, PUBLIC)
    exact = Retriever.open(settings_for(ann_home), PUBLIC)
    assert ann.dense_plan.use_index(1) and not exact.dense_plan.use_index(1)
    assert [h.chunk_id for h in ann.dense_chunks(QUESTION, k=5)] == \
        [h.chunk_id for h in exact.dense_chunks(QUESTION, k=5)]
    # `exact` is the planner's path: the generation has its index, but the default settings
    # search a sample's few allowed rows exactly, and say so in the evidence flags
    assert exact.dense_plan.ann and ann.index_flags == []
    assert exact.index_flags == ["dense_exact_search_few_allowed_rows"]


def test_refinement_re_ranks_at_most_refine_rows_candidates_and_the_plan_follows_the_settings(ann_home: Path):
    from tasks.index.dense_search import DensePlan

    plan = DensePlan(ann=True, refine_factor=10, refine_rows=1000, nprobes=24, partitions=1000,
                     rows=1_000_000)
    # probes meet as many allowed rows under a filter as without one, never beyond the index
    assert [plan.probes_for(n) for n in (1_000_000, 500_000, 100_000, 10_000, 1)] == [24, 31, 52, 112, 1000]
    assert DensePlan(ann=True, nprobes=24).probes_for(5) == 24  # an index of unknown shape
    # a top-10 request keeps its factor; the document channel's 1000 candidates are re-ranked once
    assert [plan.refine_for(n) for n in (10, 100, 150, 1000, 5000)] == [10, 10, 6, 1, 1]
    served = Retriever.open(settings_for(ann_home, index=FORCED.model_copy(update={"refine_rows": 77})), PUBLIC)
    plan = served.dense_plan  # IVF_RQ's own probes and factor
    assert (plan.nprobes, plan.refine_factor, plan.refine_rows) == (160, 60, 77)
    pinned = Retriever.open(settings_for(ann_home, index=FORCED.model_copy(update={"nprobes": 7, "refine_factor": 4})),
                            PUBLIC)
    assert (pinned.dense_plan.nprobes, pinned.dense_plan.refine_factor) == (7, 4)  # settings win
    dense = served.search.contract.dense  # the probes are planned on the index the manifest records
    assert (served.dense_plan.partitions, served.dense_plan.rows) == (dense.params["num_partitions"], dense.rows) \
        and dense.rows > 0
    # the capped search still gives the k best allowed rows, as exact search does
    exact = Retriever.open(settings_for(ann_home), PUBLIC)
    assert [h.doc_id for h in served.dense_docs(QUESTION, k=5)] == [h.doc_id for h in exact.dense_docs(QUESTION, k=5)]


def test_every_ann_type_of_the_settings_builds_and_is_recorded(tmp_path: Path):
    import lancedb

    from tasks.index.dense_build import build_dense

    table = _big_toy_table(copies=40)
    for kind in ("IVF_RQ", "IVF_SQ", "IVF_PQ", "IVF_HNSW_SQ"):
        lt = lancedb.connect(str(tmp_path / kind)).create_table("chunks", table)
        dense = build_dense(lt, table.num_rows, IndexSettings(ann_min_rows=0, ann_type=kind, num_partitions=2))
        assert dense.algorithm == kind and any(i.name == dense.name for i in lt.list_indices())
        # a purge rebuilds with the recorded algorithm and parameters, whatever the settings say
        again = build_dense(lancedb.connect(str(tmp_path / f"{kind}-2")).create_table("chunks", table),
                            table.num_rows, IndexSettings(), like=dense)
        assert (again.algorithm, again.params) == (dense.algorithm, dense.params)


NEEDLES = ["Floquet", "floquet président", "oquet prés", "DOYEN D'AGE", "d'âge", "président de",
           "la Chambre des", "é", "  séance   est  ", "Paul Bert auront", "xyz", "ge, mon", "...",
           "élu président de la Chambre des députés."]


@pytest.mark.parametrize("needle", NEEDLES)
def test_substring_search_finds_exactly_the_rows_a_scan_of_every_text_finds(lance_table, toy_table, needle):
    r = make_retriever(lance_table, toy_table)
    texts = toy_table.column("text").to_pylist()
    allowed = r.allowed
    pattern = normalize(needle)
    expected = {toy_table.column("chunk_id")[i].as_py(): normalize(t).count(pattern)
                for i, t in enumerate(texts) if allowed[i] and pattern and normalize(t).count(pattern)}
    got = {h.chunk_id: h.score for h in r.substring_chunks(needle, k=100)}
    assert got == expected


def test_bm25_from_disk_equals_the_in_memory_reference(tmp_path: Path, toy_table):
    texts, ids = toy_table.column("text").to_pylist(), toy_table.column("chunk_id")
    build_index(open_location(tmp_path / "lex"), texts, ids, stem=True, ngrams=4)
    disk = PostingsIndex.open(open_location(tmp_path / "lex"))
    ref = Bm25Index.build(texts, ids.to_pylist(), stem=True, ngrams=4)
    mask = np.array([i % 3 != 1 for i in range(len(texts))])
    for q in ("Floquet président", "budget de la guerre", "doyen d'âge Pierre Blanc", "zzz"):
        terms = analyze(q, True, 4)
        assert disk.scores(terms, mask) == pytest.approx(ref.scores(terms, mask), rel=1e-5, abs=1e-6)


def test_toy_reader_sees_no_forbidden_row_through_substring_candidates(lance_table, toy_table):
    hits = make_retriever(lance_table, toy_table, principal=TOY_READER).substring_chunks("Floquet", k=50)
    assert {h.doc_id for h in hits}.isdisjoint({"secret-1", "other-1", "nogroup-1"})


def test_the_lexical_index_is_written_to_and_read_from_s3(s3_bucket, toy_table):
    """Postings on S3 are read by positioned range reads, as on a local disk."""
    texts, ids = toy_table.column("text").to_pylist(), toy_table.column("chunk_id")
    folder = open_location(s3_bucket.uri("warehouse/indexes/g0001/lexical-x"), s3_bucket.storage)
    build_index(folder, texts, ids, stem=True, ngrams=4)
    assert any(k.endswith("lexical-x/rows.bin") for k in s3_bucket.keys("warehouse/"))
    disk = PostingsIndex.open(folder)
    ref = Bm25Index.build(texts, ids.to_pylist(), stem=True, ngrams=4)
    mask = np.ones(len(texts), bool)
    terms = analyze("Floquet président de la Chambre", True, 4)
    assert disk.scores(terms, mask) == pytest.approx(ref.scores(terms, mask), rel=1e-5, abs=1e-6)
    assert set(disk.rows_with_token("floquet", "exact").tolist()) == \
        {i for i, t in enumerate(texts) if "floquet" in normalize(t).split()}


def test_retrievers_of_every_principal_share_one_bounded_index_cache(ann_home: Path):
    from tasks.store.lance_store import serving_session

    drop_caches()
    settings = settings_for(ann_home, index=FORCED.model_copy(update={"cache_mb": 17}))
    session = serving_session(17)  # a size no other test uses: this test's cache alone
    assert session.approx_num_items == 0
    clerk = Principal(principal_id="clerk", tenant="default", groups=["public", "clerks"])
    first = Retriever.open(settings, PUBLIC)
    first.dense_chunks(QUESTION, k=5)
    cached = session.approx_num_items  # the index's parts the first search read, held once
    assert cached > 0 and session.size_bytes <= 17 << 20
    second = Retriever.open(settings, clerk)
    assert [h.chunk_id for h in second.dense_chunks(QUESTION, k=5)] == \
        [h.chunk_id for h in first.dense_chunks(QUESTION, k=5)]
    assert session.approx_num_items == cached  # read from the shared cache, not again
