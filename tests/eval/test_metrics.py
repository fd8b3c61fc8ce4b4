from __future__ import annotations

import pytest

from tasks.eval.metrics import (accepted_pr, attribute_miss, mrr_first, mrr_multi,
                                question_metrics, rank_of, recall_at_k)


def test_multi_gold_recall_counts_each_gold_document():
    ranks = rank_of(["x", "g1", "y", "z", "g2"])
    assert recall_at_k(ranks, ["g1", "g2"], 3) == 0.5
    assert recall_at_k(ranks, ["g1", "g2"], 5) == 1.0


def test_no_gold_found_scores_zero_everywhere():
    m = question_metrics(["a", "b", "c"], ["g1", "g2"], [3, 5, 10])
    assert m == {"recall@3": 0.0, "recall@5": 0.0, "recall@10": 0.0,
                 "mrr_first": 0.0, "mrr_multi": 0.0}


def test_mrr_first_and_multi_differ_when_only_the_easy_gold_is_found():
    ranks = rank_of(["g1", "a", "b", "g2"])
    assert mrr_first(ranks, ["g1", "g2"]) == 1.0
    assert mrr_multi(ranks, ["g1", "g2"]) == pytest.approx((1 + 1 / 4) / 2)
    assert mrr_multi(rank_of(["g1"]), ["g1", "g2"]) == 0.5


def test_duplicates_in_a_ranked_list_count_once_and_do_not_take_a_slot():
    ranks = rank_of(["a", "a", "a", "g1"])
    assert ranks["g1"] == 2
    assert recall_at_k(ranks, ["g1"], 2) == 1.0


def test_duplicate_gold_ids_count_once():
    assert recall_at_k(rank_of(["g1"]), ["g1", "g1", "g2"], 1) == 0.5


def test_ties_take_the_worst_rank_of_their_group():
    ranks = rank_of(["g1", "a", "b", "c"], scores=[0.5, 0.5, 0.5, 0.1])
    assert ranks["g1"] == 3 and ranks["c"] == 4
    assert recall_at_k(ranks, ["g1"], 2) == 0.0
    assert recall_at_k(ranks, ["g1"], 3) == 1.0
    assert mrr_first(ranks, ["g1"]) == pytest.approx(1 / 3)


def test_ties_with_duplicates_use_the_first_score_of_a_document():
    ranks = rank_of(["a", "g1", "a"], scores=[0.9, 0.5, 0.5])
    assert ranks == {"a": 1, "g1": 2}


def test_empty_gold_is_an_error():
    with pytest.raises(ValueError):
        recall_at_k(rank_of(["a"]), [], 1)


def test_accepted_precision_and_recall():
    assert accepted_pr(["g1", "x"], ["g1", "g2"]) == (0.5, 0.5)
    assert accepted_pr([], ["g1"]) == (None, 0.0)


@pytest.mark.parametrize("sets,expected", [
    (dict(accepted={"g"}, held={"g"}, rejected=set(), retrieved={"g"}), "accepted_below_k"),
    (dict(accepted=set(), held={"g"}, rejected={"g"}, retrieved={"g"}), "held_not_promoted"),
    (dict(accepted=set(), held=set(), rejected={"g"}, retrieved={"g"}), "rejected"),
    (dict(accepted=set(), held=set(), rejected=set(), retrieved={"g"}), "retrieved_not_reviewed"),
    (dict(accepted=set(), held=set(), rejected=set(), retrieved=set()), "never_retrieved"),
])
def test_miss_attribution_takes_the_furthest_stage(sets, expected):
    assert attribute_miss("g", **sets) == expected


def test_list_order_stands_when_scores_are_not_monotone():
    # A corpus-balanced list puts a lower-scored document ahead of a higher-scored one.
    ranks = rank_of(["a", "g1", "b"], scores=[0.9, 0.2, 0.5])
    assert ranks == {"a": 1, "g1": 2, "b": 3}
