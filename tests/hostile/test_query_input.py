"""Question text and filter arguments are untrusted: quotes, SQL and filter syntax, control
characters and sheer length never change what a LanceDB `where` clause selects, never widen
the allowed set, and never end in an exception the researcher cannot read."""
from __future__ import annotations

import json

import lancedb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from schemas.query import LoopParams
from tasks.access.policy import sql_literal
from tasks.llm.replay import ReplayProvider
from tasks.llm.rules import RulesProvider
from tasks.query.channels import filter_clause
from tasks.query.loop import answer_question
from tasks.store.layout import StoreLayout
from tests.query.conftest import DOCS, PUBLIC, make_retriever
from tests.query.loop_helpers import everything, search

VISIBLE = {d[0] for d in DOCS if d[3] == PUBLIC.tenant and set(d[4]) & set(PUBLIC.groups)}
HOSTILE = ["journal_officiel' OR '1'='1", "x' OR tenant = 't2' --", "'; DROP TABLE chunks; --",
           "le_gaulois\\' OR 1=1", "a\x00b", "\u202eevil", "%", "_", "journal_officiel\n OR true",
           "\" OR \"\"=\"", "' UNION SELECT * FROM chunks --", "$1", "${corpus}"]


@pytest.fixture(scope="module")
def literal_db(tmp_path_factory):
    return lancedb.connect(str(tmp_path_factory.mktemp("literals")))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30))
@example("x' OR '1'='1")
@example("a\\' OR 1=1 --")
@example("''''")
def test_a_quoted_literal_selects_exactly_the_rows_holding_that_text(literal_db, value):
    values = [value, value + "'", "'" + value, "other", "x"]
    table = literal_db.create_table("t", pa.table({"corpus": values, "n": list(range(len(values)))}),
                                    mode="overwrite")
    rows = table.search().where(f"corpus = {sql_literal(value)}").limit(100).to_arrow()
    assert sorted(rows["n"].to_pylist()) == [i for i, v in enumerate(values) if v == value]


@pytest.mark.parametrize("corpus", HOSTILE)
def test_a_hostile_corpus_filter_matches_nothing_and_widens_nothing(lance_table, toy_table, corpus):
    r = make_retriever(lance_table, toy_table)
    assert r.dense_chunks("Floquet président", 20, corpus=corpus) == []
    assert r.bm25_chunks("Floquet président", 20, corpus=corpus) == []
    assert r.substring_chunks("Floquet", 20, corpus=corpus) == []
    assert r.date_range_chunks("1887-01-01", "1887-12-31", 20, corpus=corpus) == []
    clause = filter_clause(r.access.where, corpus)
    assert clause.count("(") == clause.count(")") and clause.startswith(f"({r.access.where}) AND corpus = ")


@pytest.mark.parametrize("query", [*HOSTILE, "Floquet" * 3 + "\x00\x07\x1b[2J", "\t\n\r", "é" * 50])
def test_hostile_question_text_searches_only_the_allowed_set(lance_table, toy_table, query):
    r = make_retriever(lance_table, toy_table)
    hits = [*r.dense_chunks(query, 50), *r.bm25_chunks(query, 50), *r.substring_chunks(query, 50),
            *r.warm_start(query, 50)]
    assert {h.doc_id for h in hits} <= VISIBLE


def test_a_search_the_model_writes_too_long_for_the_encoder_is_skipped_with_feedback(lance_table, toy_table, tmp_path):
    from schemas.embedding import EmbeddingInputTooLong

    def embed(queries):
        if any(len(q) > 500 for q in queries):
            raise EmbeddingInputTooLong("query of 900 tokens > 256")
        return base(queries)

    r = make_retriever(lance_table, toy_table)
    base = r.search.embed_queries
    r.search.embed_queries = embed
    script = {"search": [search("dense", query="Floquet " * 200), search("finish")],
              "review": [everything("accept")]}
    package = answer_question(r, "Floquet président", ReplayProvider(script, fallback=RulesProvider()),
                              LoopParams(replan=False), layout=StoreLayout(tmp_path, tmp_path))
    record = json.loads(open(package.record, encoding="utf-8").read())
    feedback = [s.get("feedback") or "" for s in record["steps"]]
    assert any("too long" in f for f in feedback), feedback
    assert {d.doc_id for d in package.documents} <= VISIBLE


def test_a_question_too_long_for_the_encoder_is_refused_with_a_clear_error(lance_table, toy_table, tmp_path):
    from schemas.embedding import EmbeddingInputTooLong

    r = make_retriever(lance_table, toy_table)

    def embed(queries):
        if any(len(q) > 500 for q in queries):
            raise EmbeddingInputTooLong("query of 4000 tokens > 256")
        return base(queries)
    base = r.search.embed_queries
    r.search.embed_queries = embed
    with pytest.raises(EmbeddingInputTooLong, match="shorten the question"):
        answer_question(r, "Floquet " * 2000, RulesProvider(), LoopParams(replan=False),
                        layout=StoreLayout(tmp_path, tmp_path))
