from __future__ import annotations

import numpy as np
import pytest

from tasks.index.analyzer import analyze
from tests.query.reference_bm25 import Bm25Index, load_or_build

TEXTS = ["Floquet président de la Chambre", "budget de la guerre", "Floquet Floquet budget",
         "séance levée"]
IDS = ["c0", "c1", "c2", "c3"]


def test_scores_match_the_bm25_formula():
    idx = Bm25Index.build(TEXTS, IDS)
    mask = np.ones(4, bool)
    s = idx.scores(analyze("budget"), mask, k1=1.2, b=0.75)
    lengths = np.array([len(analyze(t)) for t in TEXTS], float)
    idf = np.log(1 + (4 - 2 + 0.5) / (2 + 0.5))
    expected = idf * 1 * 2.2 / (1 + 1.2 * (1 - 0.75 + 0.75 * lengths[1] / lengths.mean()))
    assert s[1] == pytest.approx(expected, rel=1e-5)
    assert s[0] == 0 and s[3] == 0


def test_masked_rows_are_not_scored_and_do_not_shape_statistics():
    idx = Bm25Index.build(TEXTS, IDS)
    mask = np.array([True, True, False, True])
    s = idx.scores(analyze("Floquet"), mask)
    assert s[2] == 0 and s[0] > 0
    # Same scores as an index built without the masked row: statistics ignore it.
    alone = Bm25Index.build([TEXTS[i] for i in (0, 1, 3)], ["c0", "c1", "c3"])
    ref = alone.scores(analyze("Floquet"), np.ones(3, bool))
    assert s[[0, 1, 3]] == pytest.approx(ref)


def test_unknown_terms_score_nothing():
    idx = Bm25Index.build(TEXTS, IDS)
    assert not idx.scores(analyze("zzzz"), np.ones(4, bool)).any()


def test_saved_index_is_reloaded_and_rebuilt_when_rows_change(tmp_path):
    first = load_or_build(tmp_path, TEXTS, IDS)
    again = load_or_build(tmp_path, TEXTS, IDS)
    assert again.vocab == first.vocab and (again.tf != first.tf).nnz == 0
    other = load_or_build(tmp_path, TEXTS[:2], IDS[:2])
    assert other.tf.shape[0] == 2
    assert len([p for p in tmp_path.iterdir()]) == 1  # replaced in place, no leftovers
