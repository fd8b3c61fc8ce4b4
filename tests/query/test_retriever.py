from __future__ import annotations

import pytest

from schemas.retrieval import AccessDenied, Principal
from tests.query.conftest import PUBLIC, make_retriever

FORBIDDEN = {"secret-1", "other-1", "nogroup-1"}


def test_bm25_never_returns_chunks_outside_the_allowed_set(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    hits = r.bm25_chunks("Floquet président", k=50)
    assert hits and {h.doc_id for h in hits}.isdisjoint(FORBIDDEN)
    assert hits[0].doc_id in {"jo-2", "gau-1"}
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))


def test_dense_prefilter_returns_k_allowed_chunks_not_leftovers_of_a_global_top_k(
        lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    hits = r.dense_chunks("Floquet Floquet président budget comité secret", k=3)
    # The forbidden chunk is the global nearest neighbour; prefiltering still yields 3 hits.
    assert len(hits) == 3 and {h.doc_id for h in hits}.isdisjoint(FORBIDDEN)


def test_group_member_sees_the_group_documents(lance_table, toy_table):
    p = Principal(principal_id="clerk", tenant="t1", groups=["public", "comite-secret"])
    r = make_retriever(lance_table, toy_table, principal=p)
    assert "secret-1" in {h.doc_id for h in r.bm25_docs("Floquet", k=10)}
    assert "secret-1" in {h.doc_id for h in r.dense_docs("Floquet comité secret", k=10)}


def test_excluded_documents_vanish_from_every_channel(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table, excluded={"jo-2"})
    assert "jo-2" not in {h.doc_id for h in r.bm25_docs("Floquet président", k=10)}
    assert "jo-2" not in {h.doc_id for h in r.dense_docs("Floquet président", k=10)}
    assert "jo-2" not in {h.doc_id for h in r.temporal_docs("1887-01-13", k=10)}
    assert "jo-2" not in {h.doc_id for h in r.substring_chunks("Floquet", k=10)}
    assert "jo-2" not in {h.doc_id for h in r.date_range_chunks("1887-01-01", "1887-12-31")}
    with pytest.raises(KeyError):
        r.chunk("jo-2#0")


def test_forbidden_chunk_lookup_looks_like_a_missing_one(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    with pytest.raises(KeyError) as forbidden:
        r.chunk("secret-1#0")
    with pytest.raises(KeyError) as missing:
        r.chunk("nope#0")
    assert "visible" in str(forbidden.value) and "visible" in str(missing.value)
    assert r.chunk("jo-1#1").text.startswith("La séance")


def test_principal_without_groups_is_refused(lance_table, toy_table):
    with pytest.raises(AccessDenied):
        make_retriever(lance_table, toy_table,
                       principal=Principal(principal_id="x", tenant="t1", groups=[]))


def test_docs_are_max_pooled_one_hit_per_document(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    docs = r.bm25_docs("Floquet Paul Bert obsèques", k=10)
    assert len({d.doc_id for d in docs}) == len(docs)
    jo2 = next(d for d in docs if d.doc_id == "jo-2")
    assert jo2.best_chunk_id == "jo-2#1"  # the obsèques chunk beats the election chunk


def test_corpus_filter_restricts_candidates(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    assert {h.corpus for h in r.bm25_chunks("Floquet", corpus="le_gaulois")} == {"le_gaulois"}
    assert {h.corpus for h in r.dense_chunks("Floquet", corpus="le_gaulois")} == {"le_gaulois"}


def test_date_range_is_inclusive_and_orders_by_query(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    hits = r.date_range_chunks("1887-01-13", "1887-01-13", query="obsèques Paul Bert")
    assert {h.doc_id for h in hits} == {"jo-2", "int-1"}
    assert hits[0].chunk_id == "jo-2#1"


def test_temporal_decays_with_distance_and_skips_undated(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    docs = r.temporal_docs("1887-01-13", k=10, half_life_days=1.0)
    by_id = {d.doc_id: d for d in docs}
    assert "undated-1" not in by_id
    assert by_id["jo-2"].score == pytest.approx(1.0) and by_id["gau-1"].score == pytest.approx(0.5)
    assert by_id["jo-2"].best_chunk_id == "jo-2#0"


def test_substring_ignores_case_and_accents(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    hits = r.substring_chunks("DOYEN D'AGE")
    assert {h.doc_id for h in hits} == {"jo-1", "int-1"}


def test_warm_start_target_corpus_constrains_candidates(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    fused = r.warm_start("Floquet président", k=5, target_corpus="le_gaulois", date="1887-01-13")
    assert fused and {h.corpus for h in fused} == {"le_gaulois"}
    assert set(fused[0].ranks) == {"bm25", "dense", "temporal"}


def test_corpora_lists_only_what_the_principal_sees(lance_table, toy_table):
    p = Principal(principal_id="x", tenant="t2", groups=["public"])
    assert make_retriever(lance_table, toy_table, principal=p).corpora() == ["le_gaulois"]


def test_the_lexical_index_is_read_from_the_index_dir_and_never_written_there(lance_table, toy_table,
                                                                             tmp_path):
    from tasks.index.generation_indexes import LEXICAL_COLUMNS
    from tasks.index.lexical_build import build_lexical
    from tasks.index.lexical_format import lexical_folder
    from tasks.query.searchable import drop_caches
    from tasks.store.location import open_location

    r = make_retriever(lance_table, toy_table, index_dir=tmp_path / "idx")
    first = r.bm25_chunks("Floquet")  # none there: a scratch index of this process serves
    assert not (tmp_path / "idx").exists()
    index_dir = open_location(tmp_path / "idx")  # what publish and `mabillon reindex` build
    build_lexical(index_dir, lance_table.to_arrow().select(LEXICAL_COLUMNS), r.params.stem,
                  r.params.char_ngrams)
    drop_caches("g0001")
    again = make_retriever(lance_table, toy_table, index_dir=tmp_path / "idx")
    assert again.lexical().folder.uri == lexical_folder(index_dir, r.params.stem, r.params.char_ngrams).uri
    assert [h.chunk_id for h in again.bm25_chunks("Floquet")] == [h.chunk_id for h in first]


def test_warm_start_without_target_interleaves_corpora(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    fused = r.warm_start("Floquet président élection", k=3)
    assert len({h.corpus for h in fused}) == len(fused)  # three corpora, one each first
    unbalanced = make_retriever(lance_table, toy_table, balance_corpora=False)
    assert [h.rank for h in unbalanced.warm_start("Floquet président", k=3)] == [1, 2, 3]


def test_warm_start_holds_a_question_naming_two_corpora_to_them(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    q = "Entre L'Intransigeant et Le Gaulois, que disent-ils de Floquet et de Pierre Blanc ?"
    assert {h.corpus for h in r.warm_start(q, k=10)} == {"l_intransigeant", "le_gaulois"}
    off = make_retriever(lance_table, toy_table, corpus_cues=False)
    assert "journal_officiel" in {h.corpus for h in off.warm_start(q, k=10)}


def test_warm_start_runs_the_dense_channel_beside_the_lexical_one(lance_table, toy_table, monkeypatch):
    import threading

    from tasks.query.fusion import rrf

    r = make_retriever(lance_table, toy_table, balance_corpora=False)
    query = "Floquet président budget"
    alone = {"bm25": r.bm25_docs(query, 100), "dense": r.dense_docs(query, 100)}
    want = rrf(alone, {c: w for c, w in r.params.weights.items() if c in alone}, k=r.params.rrf_k)
    seen: dict[str, str] = {}
    both_running = threading.Barrier(2, timeout=30)  # each channel waits for the other: only
    for name in ("bm25_docs", "dense_docs"):        # channels running at once get past it
        channel = getattr(r, name)

        def wrapped(*args, _name=name, _channel=channel):
            seen[_name] = threading.current_thread().name
            both_running.wait()
            return _channel(*args)
        monkeypatch.setattr(r, name, wrapped)
    got = r.warm_start(query, k=5)
    assert seen["dense_docs"] != seen["bm25_docs"]
    assert [(h.doc_id, h.ranks) for h in got] == [(h.doc_id, h.ranks) for h in want[:5]]


def test_a_failing_dense_channel_fails_the_warm_start(lance_table, toy_table, monkeypatch):
    from schemas.indexes import IndexUnavailable

    r = make_retriever(lance_table, toy_table)

    def broken(*args):
        raise IndexUnavailable("generation g-test: its vector index cannot be read")
    monkeypatch.setattr(r, "dense_docs", broken)
    with pytest.raises(IndexUnavailable, match="g-test"):
        r.warm_start("Floquet président", k=5)


def _warm_start_in_child(r, queue) -> None:
    queue.put([h.doc_id for h in r.warm_start("Floquet président", k=3)])


# The parent: the toy generation, a warm start, then a child forked to warm-start on its own.
FORKING_PARENT = """
import json, multiprocessing, sys
import lancedb
from tests.query.conftest import chunk_table, make_retriever
from tests.query.test_retriever import _warm_start_in_child
table = chunk_table()
r = make_retriever(lancedb.connect(sys.argv[1]).create_table("chunks", table), table)
want = [h.doc_id for h in r.warm_start("Floquet président", k=3)]
ctx = multiprocessing.get_context("fork")
queue = ctx.Queue()
child = ctx.Process(target=_warm_start_in_child, args=(r, queue), daemon=True)  # a hung child dies with us
child.start()
got = queue.get(timeout=60)
child.join(10)
print(json.dumps({"want": want, "got": got, "exitcode": child.exitcode}))
"""


def test_a_forked_process_runs_warm_starts_of_its_own(tmp_path):
    """A child forked after the parent's warm starts has the parent's pool but not its threads.

    The parent is a process of its own. Forked from an xdist worker, the child also inherited
    whatever other tests' threads were doing at that instant, and LanceDB (whose fork support
    resets its runtime in the child, and warns that state mid-operation at fork time can still
    deadlock) hung or crashed in 2 of 3 full runs, never here."""
    import json
    import subprocess
    import sys

    from schemas.settings import PROJECT_ROOT

    done = subprocess.run([sys.executable, "-c", FORKING_PARENT, str(tmp_path / "lance")], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["want"] and result["got"] == result["want"] and result["exitcode"] == 0


def _long_document_table():
    """One document of 24 chunks all about the query, beside 12 one-chunk documents less so."""
    import json

    import pyarrow as pa

    from schemas.lineage import chunk_table_schema
    from tests.query.conftest import DIM, toy_vector

    texts = [("long", f"Floquet président de la Chambre, séance {i}, votes {i}") for i in range(24)]
    texts += [(f"short-{i}", f"Floquet, un article du jour {i} sur la Chambre") for i in range(12)]
    rows = [{"chunk_id": f"{d}#{n}", "revision_id": f"r-{d}", "source_id": f"s-{d}", "doc_id": d,
             "corpus": "journal_officiel", "date": "1887-01-13", "tenant": "t1", "groups": ["public"],
             "ordinal": n, "text": t, "n_tokens": len(t.split()), "char_start": 0, "char_end": len(t),
             "page_start": 1, "page_end": 1, "spans_json": json.dumps([]), "segmenter": "toy",
             "vector": toy_vector(t).tolist()}
            for n, (d, t) in enumerate(texts)]
    return pa.Table.from_pylist(rows, schema=chunk_table_schema(DIM))


def test_dense_documents_widen_until_the_nearest_chunks_hold_k_documents(tmp_path, monkeypatch):
    """The first search asks DOC_FANOUT·k chunks; when those belong to fewer than k documents
    (one long document near the query), it searches wider: the answer is the k documents a
    search of `dense_candidates` chunks gives, whichever way it is reached."""
    import lancedb

    from tasks.query import channels
    from tasks.query.view import max_pool

    table = _long_document_table()
    lance_table = lancedb.connect(str(tmp_path / "lance")).create_table("chunks", table)
    r = make_retriever(lance_table, table)
    limits = []
    searched = r.search.dense_rows
    monkeypatch.setattr(r.search, "dense_rows", lambda q, limit, *a: limits.append(limit) or searched(q, limit, *a))
    query = "Floquet président de la Chambre"
    mask = r.view.filter_mask(r.allowed, None)
    for k in (1, 3, 5, 13):
        limits.clear()
        rows, sims = searched(query, r.params.dense_candidates, mask, channels.filter_clause(r.access.where))
        expected = [(h.doc_id, h.best_chunk_id) for h in max_pool(r.view, rows, sims, k)]
        assert [(h.doc_id, h.best_chunk_id) for h in r.dense_docs(query, k)] == expected
        assert limits[0] == min(channels.DOC_FANOUT * k, table.num_rows)
        if k == 3:  # the 9 nearest chunks are all the long document's: one wider search
            assert limits == [9, 36]
        if k == 1:
            assert limits == [3]
    assert len(r.dense_docs(query, 13)) == 13  # every document, though 24 chunks come first
