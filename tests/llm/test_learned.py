"""The learned judge: its model file (digest, refusals that name the file), the policy it
drives (probabilities → verdicts with their confidence), and its place in the loop (digest in
every query record, replay, the flagged fallback to rules)."""
from __future__ import annotations

import numpy as np
import pytest

from schemas.query import LoopParams
from schemas.settings import LlmSettings
from tasks.eval.judge_data import JudgeData
from tasks.eval.judge_training import accepted_pr, choose_thresholds, fit
from tasks.llm.features import FEATURES
from tasks.llm.judge_model import PACKAGED, JudgeModel, JudgeModelError, Thresholds
from tasks.llm.learned import LearnedProvider
from tasks.llm.registry import make_provider
from tasks.llm.replay import ReplayProvider
from tasks.query.loop import answer_question
from tasks.query.record import read_record
from tasks.store.layout import StoreLayout
from tests.query.conftest import lance_table, make_retriever, toy_table  # noqa: F401 (fixtures)

Q = "Comment la presse juge-t-elle M. Floquet, élu président de la Chambre ?"


def synthetic(n_questions=30, per_q=12, seed=0) -> JudgeData:
    """Rows where gold passages rank high in the warm start and name the question's entities."""
    rng = np.random.default_rng(seed)
    X, y, q, d = [], [], [], []
    for i in range(n_questions):
        for j in range(per_q):
            gold = j < 2
            row = rng.normal(size=len(FEATURES)).astype(np.float32)
            row[FEATURES.index("warm_fused")] = rng.integers(1, 4) if gold else rng.integers(3, 30)
            row[FEATURES.index("entity_match_mean")] = rng.uniform(0.5, 1) if gold else rng.uniform(0, 0.6)
            row[FEATURES.index("tool")] = rng.integers(0, 5)
            X.append(row), y.append(gold), q.append(f"q{i}"), d.append(f"q{i}-d{j}")
    n = len(y)
    return JudgeData(np.asarray(X), np.asarray(y), np.asarray(q, object), np.asarray(d, object),
                     np.asarray(["review"] * n, object))


@pytest.fixture(scope="module")
def model() -> JudgeModel:
    data = synthetic()
    groups = np.array([int(x[1:]) for x in data.question])
    return fit(data, groups)


def test_probabilities_are_calibrated_separate_gold_and_thresholds_come_from_training(model):
    data = synthetic(seed=1)
    p = model.probabilities(data.X)
    assert ((p >= 0) & (p <= 1)).all()
    assert p[data.y].mean() > 0.7 > 0.3 > p[~data.y].mean()
    t = model.thresholds
    assert 0.05 <= t.hold <= t.accept <= 0.95
    assert model.trained["thresholds"] == {"accept": t.accept, "hold": t.hold}


def test_accept_threshold_is_half_the_best_out_of_fold_f1():
    data = synthetic(seed=2)
    p = np.where(data.y, 0.8, 0.1).astype(float)  # perfect separation: best F1 is 1
    assert accepted_pr(p, data, 0.5) == (1.0, 1.0)
    assert choose_thresholds(p, data).accept == 0.5


def test_model_file_round_trips_with_its_digest(model, tmp_path):
    path = tmp_path / "judge.joblib"
    digest = model.save(path)
    loaded = JudgeModel.load(path)
    assert digest.startswith("sha256:") and loaded.digest == digest
    x = synthetic(seed=3).X
    assert np.allclose(loaded.probabilities(x), model.probabilities(x))
    assert path.stat().st_size < 2_000_000  # small enough to commit


def test_a_corrupt_or_missing_model_file_is_refused_naming_it(tmp_path):
    bad = tmp_path / "judge.joblib"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(JudgeModelError, match=str(bad)):
        JudgeModel.load(bad)
    with pytest.raises(JudgeModelError, match="cannot be read"):
        JudgeModel.load(tmp_path / "absent.joblib")
    # asked for by name, the learned provider refuses rather than guessing
    with pytest.raises(JudgeModelError, match=str(bad)):
        make_provider(LlmSettings(provider="learned", judge_path=bad))


def test_the_offline_default_falls_back_to_rules_with_a_flag(lance_table, toy_table, tmp_path):
    bad = tmp_path / "judge.joblib"
    bad.write_bytes(b"\x80\x04truncated")
    provider = make_provider(LlmSettings(judge_path=bad))
    assert provider.name == "rules" and str(bad) in provider.fallback_reason
    r = make_retriever(lance_table, toy_table)
    pkg = answer_question(r, Q, provider, LoopParams(), layout=StoreLayout(tmp_path, tmp_path))
    assert "judge_fallback_rules" in pkg.flags
    record = read_record(pkg.record)
    assert record.judge.policy == "rules" and record.judge.digest is None
    assert str(bad) in record.judge.fallback


def test_verdicts_follow_the_thresholds_and_carry_the_probability(model, lance_table, toy_table,
                                                                   tmp_path):
    provider = LearnedProvider(model)
    r = make_retriever(lance_table, toy_table)
    pkg = answer_question(r, Q, provider, LoopParams(), layout=StoreLayout(tmp_path, tmp_path))
    record = read_record(pkg.record)
    verdicts = [v for s in record.steps for v in s.verdicts if v.by == "agent"]
    assert verdicts and all(v.probability is not None for v in verdicts)
    t = model.thresholds
    for v in verdicts:
        want = "accept" if v.probability >= t.accept else "hold" if v.probability >= t.hold else "reject"
        assert v.decision == want and v.rationale.startswith("P ")
    assert pkg.provider == "learned" and record.judge.digest == model.digest


def test_a_learned_run_replays_exactly(model, lance_table, toy_table, tmp_path):
    r = make_retriever(lance_table, toy_table)
    layout = StoreLayout(tmp_path / "wh", tmp_path / "mf")
    first = answer_question(r, Q, LearnedProvider(model), LoopParams(), layout=layout)
    replay = ReplayProvider.from_record(first.record)
    again = answer_question(r, Q, replay, LoopParams(), layout=layout)
    assert replay.remaining() == {}
    assert [d.doc_id for d in again.documents] == [d.doc_id for d in first.documents]
    assert again.accepted == first.accepted and again.held == first.held
    a, b = read_record(first.record), read_record(again.record)
    assert [s.prompt_digest for s in a.steps] == [s.prompt_digest for s in b.steps]
    assert [v.probability for s in a.steps for v in s.verdicts] == \
        [v.probability for s in b.steps for v in s.verdicts]


def test_the_packaged_model_loads_and_is_the_offline_default():
    model = JudgeModel.load(PACKAGED)
    assert model.digest and model.trained["questions"] > 100
    assert 0 < model.thresholds.hold <= model.thresholds.accept < 1
    provider = make_provider(LlmSettings())
    assert provider.name == "learned" and provider.judge.digest == model.digest
    assert isinstance(model.thresholds, Thresholds)
