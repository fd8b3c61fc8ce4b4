"""The bounded BM25 walk (`PostingsIndex.top`) against exhaustive scoring, on a synthetic
generation large enough that long posting lists are skipped: same k best rows and documents,
same scores, with the principal's statistics, under every kind of mask."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tasks.index.postings as postings
from tasks.index.analyzer import analyze
from tasks.index.lexical_build import build_index
from tasks.index.postings import PostingsIndex
from tasks.store.location import open_location

ROWS = 24_000
COMMON = ["chambre", "deputes", "seance", "projet", "ministre", "budget", "commission", "loi"]
RARE = [f"mot{i:04d}" for i in range(3000)]


def _texts(rng: np.random.Generator) -> list[str]:
    """Every row holds a few common words (postings of thousands) and a few rare ones."""
    out = []
    for _ in range(ROWS):
        n_common, n_rare = int(rng.integers(2, 9)), int(rng.integers(1, 6))
        words = list(rng.choice(COMMON, n_common)) + [RARE[int(i)] for i in rng.zipf(1.3, n_rare) % len(RARE)]
        out.append(" ".join(words))
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(7)
    texts = _texts(rng)
    classes = rng.integers(0, 6, ROWS).astype(np.int32)
    classes[rng.random(ROWS) < 0.02] = -1  # rows without a policy: a class of their own
    folder = tmp_path_factory.mktemp("lex") / "idx"
    import pyarrow as pa
    ids = pa.array([f"c{i}" for i in range(ROWS)])
    build_index(open_location(folder), texts, ids, stem=True, ngrams=0, row_class=classes)
    index = PostingsIndex.open(open_location(folder))
    docs = (np.arange(ROWS) // 7).astype(np.int64)  # seven chunks a document
    return index, classes, docs, folder


def _masks(classes: np.ndarray) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    tombstoned = rng.random(classes.size) < 0.05
    return {
        "everything": np.ones(classes.size, bool),
        "two classes": np.isin(classes, [1, 4]),
        "one class less tombstones": (classes == 2) & ~tombstoned,
        "all less tombstones": ~tombstoned,
        "no policy only": classes == -1,
    }


QUERIES = ["chambre des deputes seance budget", "projet de loi mot0001 mot0002",
           "commission ministre mot0003", "loi loi budget mot2999 mot0010 chambre", "inconnu"]


def _check_rows(index, mask, target, query, k=10):
    terms = analyze(query, True, 0)
    ref = index.scores(terms, mask)
    rows, scores = index.top(terms, mask, target, k)
    assert np.all(target[rows]), "a row outside the target came back"
    assert np.allclose(scores, ref[rows], rtol=1e-5, atol=1e-6), "a returned score is not exact"
    cand = np.flatnonzero(target & (ref > 0))
    if cand.size == 0:
        assert rows.size == 0
        return rows, cand
    order = np.lexsort((cand, -ref[cand]))
    want = ref[cand[order[:k]]]
    got = np.sort(scores)[::-1][:k]
    assert np.allclose(got, want, rtol=1e-5, atol=1e-6), "the k best scores differ"
    kth = want[-1]
    # every row strictly above the k-th best is returned (ties at the k-th may be either)
    assert set(cand[ref[cand] > kth * (1 + 1e-5)].tolist()) <= set(rows.tolist())
    return rows, cand


@pytest.mark.parametrize("name", list(_masks(np.zeros(1, np.int32))))
def test_the_k_best_rows_equal_exhaustive_scoring_under_every_mask(corpus, name):
    index, classes, _, _ = corpus
    mask = _masks(classes)[name]
    assert index.prunable
    for query in QUERIES:
        _check_rows(index, mask, mask, query)


def test_a_target_narrower_than_the_mask_keeps_the_masks_statistics(corpus):
    index, classes, _, _ = corpus
    mask = _masks(classes)["all less tombstones"]
    target = mask & (np.arange(ROWS) % 5 == 0)  # a corpus or date filter inside what one may see
    for query in QUERIES:
        _check_rows(index, mask, target, query)


def test_long_lists_are_skipped_not_scored_whole(corpus):
    """The walk must not return every matching row: that is what makes it bounded."""
    index, classes, _, _ = corpus
    mask = np.ones(ROWS, bool)
    rows, cand = _check_rows(index, mask, mask, "chambre deputes seance mot0001 mot0002")
    assert cand.size > 10_000 and rows.size < cand.size / 4


def test_document_frequencies_follow_the_principal_not_the_collection(corpus):
    index, classes, _, _ = corpus
    for mask in _masks(classes).values():
        for term in ("chambre", "mot0001", "mot2999"):
            col = int(index.column_of(analyze(term, True, 0))[0])
            assert col >= 0
            rows, _ = index.postings(col)
            assert index.document_frequency(col, index._term_record(col), mask) == int(mask[rows].sum())


def test_many_hidden_rows_are_counted_on_the_postings(corpus, monkeypatch):
    index, classes, _, _ = corpus
    monkeypatch.setattr(postings, "MAX_CORRECTED_ROWS", 10)
    index._excluded.clear()
    mask = _masks(classes)["all less tombstones"]
    for query in QUERIES:
        _check_rows(index, mask, mask, query)
    index._excluded.clear()


@pytest.mark.parametrize("name", ["everything", "two classes", "all less tombstones"])
def test_the_k_best_documents_equal_max_pooled_exhaustive_scores(corpus, name):
    index, classes, docs, _ = corpus
    mask = _masks(classes)[name]
    k = 10
    for query in QUERIES:
        terms = analyze(query, True, 0)
        ref = index.scores(terms, mask)
        best = np.zeros(docs.max() + 1, np.float32)
        np.maximum.at(best, docs[mask], ref[mask])
        want = np.sort(best[best > 0])[::-1][:k]
        rows, scores = index.top(terms, mask, mask, k, doc_codes=docs)
        got = np.zeros(docs.max() + 1, np.float32)
        np.maximum.at(got, docs[rows], scores)
        assert np.allclose(np.sort(got[got > 0])[::-1][:k], want, rtol=1e-5, atol=1e-6)


def test_an_index_written_before_the_statistics_is_scored_exhaustively(corpus, tmp_path):
    index, classes, _, folder = corpus
    old = tmp_path / "old"
    old.mkdir()
    for f in Path(folder).iterdir():
        if f.name not in ("term_stats.bin", "class_df.bin", "row_class.npy"):
            (old / f.name).write_bytes(f.read_bytes())
    meta = json.loads((old / "meta.json").read_text())
    del meta["pruning"], meta["classes"]
    (old / "meta.json").write_text(json.dumps(meta))
    legacy = PostingsIndex.open(open_location(old))
    assert not legacy.prunable
    mask = _masks(classes)["two classes"]
    for query in QUERIES:
        _check_rows(legacy, mask, mask, query)


def test_statistics_that_do_not_match_the_postings_are_refused(corpus, tmp_path):
    _, _, _, folder = corpus
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in Path(folder).iterdir():
        (broken / f.name).write_bytes(f.read_bytes()[:-16] if f.name == "term_stats.bin" else f.read_bytes())
    with pytest.raises(ValueError, match="access-class statistics"):
        PostingsIndex.open(open_location(broken))


@pytest.fixture(scope="module")
def decoy(tmp_path_factory):
    """A rare term held only by long rows that nothing else of the query matches, and the best
    rows holding only common terms (lists long enough for the walk to consider stopping): a
    walk that stopped on a threshold above the true k-th best would answer with the decoys."""
    rng = np.random.default_rng(11)
    texts = []
    for i in range(20_000):
        if i % 400 == 0:  # 50 decoys: the rare term once, in a long row
            texts.append("rare " + " ".join(f"pad{int(j)}" for j in rng.integers(0, 500, 40)))
        elif i % 3 == 0:  # the best rows: both common terms, short rows, high tf
            texts.append("alpha alpha beta beta " + f"pad{int(rng.integers(0, 500))}")
        else:
            texts.append(" ".join(f"pad{int(j)}" for j in rng.integers(0, 500, 8)))
    import pyarrow as pa
    folder = tmp_path_factory.mktemp("decoy") / "idx"
    build_index(open_location(folder), texts, pa.array([f"c{i}" for i in range(len(texts))]),
                stem=True, ngrams=0, row_class=np.zeros(len(texts), np.int32))
    return PostingsIndex.open(open_location(folder)), (np.arange(len(texts)) // 7).astype(np.int64)


def test_the_walk_does_not_stop_on_the_rare_terms_rows_alone(decoy, monkeypatch):
    index, docs = decoy
    mask = np.ones(index.rows, bool)
    terms = analyze("rare alpha beta", True, 0)
    ref = index.scores(terms, mask)
    decoys = np.arange(index.rows) % 400 == 0
    assert ref[decoys].max() < np.sort(ref)[-10]  # the trap is set: no decoy is among the best
    _check_rows(index, mask, mask, "rare alpha beta")
    # and with documents: the best documents are those of the common terms' rows, exactly
    best = np.zeros(docs.max() + 1, np.float32)
    np.maximum.at(best, docs, ref)
    rows, scores = index.top(terms, mask, mask, 10, doc_codes=docs)
    got = np.zeros_like(best)
    np.maximum.at(got, docs[rows], scores)
    assert np.allclose(np.sort(got)[::-1][:10], np.sort(best)[::-1][:10], rtol=1e-5, atol=1e-6)
