"""Tool arguments, duplicate keys and the silent date widening."""
from __future__ import annotations

import pytest

from tasks.query.tools import ToolError, check_args, run_search, search_key
from tests.query.conftest import make_retriever

CORPORA = ["journal_officiel", "le_gaulois"]


def test_search_key_ignores_case_spacing_and_empty_args():
    assert search_key("bm25", {"query": " Floquet  président", "corpus": None}) == \
        search_key("bm25", {"query": "floquet président"})
    assert search_key("bm25", {"query": "a"}) != search_key("dense", {"query": "a"})


@pytest.mark.parametrize("tool,args,msg", [
    ("bm25", {"query": " "}, "non-empty"), ("substring", {"text": "ab"}, "3 characters"),
    ("date_range", {"date_from": "1887-13-01", "date_to": "1887-01-02"}, "ISO date"),
    ("date_range", {"date_from": "1887-02-01", "date_to": "1887-01-02"}, "after"),
    ("bm25", {"query": "x", "corpus": "le_figaro"}, "unknown corpus"), ("grep", {}, "unknown tool")])
def test_bad_arguments_are_tool_errors_with_a_reason(tool, args, msg):
    with pytest.raises(ToolError, match=msg):
        check_args(tool, args, CORPORA)


def test_date_range_widens_by_a_day_and_separates_the_widened_hits(lance_table, toy_table):
    r = make_retriever(lance_table, toy_table)
    args = check_args("date_range", {"date_from": "1887-01-13", "date_to": "1887-01-13"},
                      ["journal_officiel", "le_gaulois", "l_intransigeant"])
    inside, widened = run_search(r, "date_range", args, k=20, widen_days=1)
    assert {h.date for h in inside} == {"1887-01-13"} and not any(h.widened for h in inside)
    assert [(h.doc_id, h.widened) for h in widened] == [("gau-1", True)]
    _, none = run_search(r, "date_range", args, k=20, widen_days=0)
    assert none == []


def test_a_found_hit_is_a_stamped_copy_and_its_summary_keeps_the_recorded_keys():
    from schemas.retrieval import Hit, WarmRanks

    channel = Hit(chunk_id="d#0", doc_id="d", score=2.5, rank=1, corpus="c", date="1887-01-13",
                  text="texte", page_start=3, char_start=10, char_end=20, ordinal=0, doc_chunks=2)
    found = channel.found_by("date_range", widened=True)
    found.warm = WarmRanks(fused=4)
    assert channel.tool is None and not channel.widened and channel.warm is None
    # the keys (and their order) every query record has carried for a search's hits
    assert found.summary() == {
        "chunk_id": "d#0", "doc_id": "d", "corpus": "c", "date": "1887-01-13", "tool": "date_range",
        "rank": 1, "score": 2.5, "page_start": 3, "char_start": 10, "char_end": 20, "widened": True,
        "warm": {"bm25": None, "dense": None, "temporal": None, "fused": 4, "score": None}, "ordinal": 0,
        "doc_chunks": 2}
    assert list(found.summary()) == ["chunk_id", "doc_id", "corpus", "date", "tool", "rank", "score",
                                     "page_start", "char_start", "char_end", "widened", "warm",
                                     "ordinal", "doc_chunks"]
