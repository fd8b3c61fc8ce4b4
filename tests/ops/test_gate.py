"""The gate's decisions applied to a real store: approve promotes, reject retires, canary routes,
a timeout leaves the candidate staged; refused decisions change nothing; each leaves a record."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from schemas.release import GateDecision
from schemas.retrieval import AccessDenied
from tasks.access.principals import token_digest
from tasks.ops.canary import CanaryRefused
from tasks.ops.gate_decision import DecisionRefused, apply_decision, gate_markdown, gate_report, record_timeout
from tasks.ops.release_record import build_release_record, newest_arrival, release_record_markdown
from tasks.ops.switching import GenerationUnavailable
from tasks.store.lance_store import tagged_generations
from tasks.store.layout import StoreLayout
from tasks.store.manifests import read_manifest
from tasks.store.release_records import write_release_record
from tasks.store.routing import read_routing, update_routing
from tests.conftest import settings_for
from tests.ops.gate_helpers import PRINCIPALS, build_base, copy_home, publish_since

QUESTIONS = [
    {"question_id": "q1", "question_type": "lookup", "question": "Quand le débat sur les blés viendra-t-il ?",
     "gold_ids": ["temps-1887-03-05"]},
    {"question_id": "q2", "question_type": "lookup", "question": "Qui demande une enquête sur les raffineries ?",
     "gold_ids": ["jo-1887-03-10"]},
    {"question_id": "q3", "question_type": "press", "question": "Que dit la presse du renvoi du débat ?",
     "gold_ids": ["gaulois-1887-03-03", "intransigeant-1887-03-04"]},
]


@pytest.fixture(scope="module")
def base_home(tmp_path_factory) -> Path:
    return build_base(tmp_path_factory.mktemp("gate-base"))


@pytest.fixture
def settings(base_home, tmp_path):
    home = copy_home(base_home, tmp_path / "home")
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in QUESTIONS), "utf-8")
    s = settings_for(home)
    return s.model_copy(update={"gate": s.gate.model_copy(update={"questions": questions})})


@pytest.fixture(scope="module")
def stale_home(base_home, tmp_path_factory) -> Path:
    """The base, then g0003 published ungated while g0002 waits: g0002's base no longer serves."""
    return publish_since(copy_home(base_home, tmp_path_factory.mktemp("gate-stale") / "home"))


@pytest.fixture
def stale(stale_home, tmp_path):
    return settings_for(copy_home(stale_home, tmp_path / "home"))


def layout_of(settings) -> StoreLayout:
    return StoreLayout.from_settings(settings)


def decide(settings, **fields):
    return apply_decision(layout_of(settings), settings, "g0002",
                          GateDecision(**{"generation": "g0002", "reason": "looks right", **fields}), "run-1")


def test_the_report_shadows_the_candidate_by_question_type(settings):
    report = gate_report(settings, read_manifest(layout_of(settings), "g0002"))
    s = report.shadow
    assert s and (s.staged, s.serving, s.n) == ("g0002", "g0001", 3)
    assert [(t.question_type, t.n) for t in s.by_type] == [("lookup", 2), ("press", 1)]
    # the new record is only in the candidate: its question is found there and not in serving
    q1 = next(r for r in s.rows if r.question_id == "q1")
    assert q1.recall_staged == 1.0 and q1.recall_serving == 0.0
    assert report.diff["added"] == 1 and report.counts.sources == 5
    text = gate_markdown(report)
    assert "| lookup | 2 |" in text and "added 1" in text and "g0001" in text


def test_approval_promotes_and_the_record_says_who_when_why(settings):
    layout = layout_of(settings)
    before = read_routing(layout)
    arrival = newest_arrival(layout, "g0002")
    decision, after = decide(settings, decision="approve", operator="ana")
    assert after.serving == "g0002" and after.history[-1].action == "promote"
    assert after.history[-1].actor == "ana" and after.history[-1].flow_run_id == "run-1"
    assert (decision.actor, decision.authenticated, decision.action) == ("ana", False, "approve")
    record = build_release_record(layout, "g0002", decision, before, after, arrival,
                          gate_report(settings, read_manifest(layout, "g0002")).shadow)
    path = write_release_record(layout, record)
    stored = yaml.safe_load(path.read_text("utf-8"))
    assert stored["manifest_sha256"] == hashlib.sha256(layout.manifest_path("g0002").read_bytes()).hexdigest()
    assert stored["decision"]["reason"] == "looks right" and stored["rollback_target"] == "g0001"
    assert stored["serving_before"] == "g0001" and stored["serving_after"] == "g0002"
    assert stored["validation"]["success"] and stored["shadow"]["by_type"]
    f = record.freshness
    assert f.newest_source.endswith("b.jsonl#L1") and f.answerable_at == decision.at
    assert 0 < f.seconds == pytest.approx((f.answerable_at - f.newest_arrival_at).total_seconds())
    assert "approve** by ana (not authenticated)" in release_record_markdown(record, str(path))


def test_rejection_retires_the_candidate_and_serving_is_untouched(settings):
    decision, after = decide(settings, decision="reject", reason="recall dropped")
    assert after.serving == "g0001" and "g0002" in after.retired
    assert after.history[-1].action == "reject" and after.history[-1].reason == "recall dropped"
    assert "g0002" not in tagged_generations(layout_of(settings))
    with pytest.raises(GenerationUnavailable):  # nothing can bring it back by accident
        decide(settings, decision="approve")


def test_a_canary_decision_routes_the_groups(settings):
    decision, after = decide(settings, decision="canary", canary_groups=["staff"])
    assert after.serving == "g0001" and after.canaries[0].groups == ["staff"]
    assert decision.canary_groups == ["staff"]


def _unchanged(settings, call, error, match):
    layout = layout_of(settings)
    before = layout.routing.read_bytes()
    with pytest.raises(error, match=match):
        call()
    assert layout.routing.read_bytes() == before
    assert "g0002" in tagged_generations(layout)


def test_a_decision_for_another_generation_is_refused(settings):
    _unchanged(settings, lambda: decide(settings, decision="approve", generation="g0001"),
               DecisionRefused, "gates g0002, not 'g0001'")


def test_an_approval_for_a_generation_that_no_longer_exists_is_refused(settings):
    layout = layout_of(settings)
    update_routing(layout, retired=["g0002"])  # gc retired it while the gate waited
    before = layout.routing.read_bytes()
    with pytest.raises(GenerationUnavailable, match="g0002 is retired"):
        decide(settings, decision="approve")
    assert layout.routing.read_bytes() == before and read_routing(layout).serving == "g0001"


def test_a_canary_to_a_group_nobody_has_is_refused(settings):
    _unchanged(settings, lambda: decide(settings, decision="canary", canary_groups=["ghosts"]),
               CanaryRefused, "no principal holds")
    _unchanged(settings, lambda: decide(settings, decision="canary"), DecisionRefused, "at least one group")


def test_with_operators_configured_a_decision_needs_an_operator_token(settings):
    principals = {**PRINCIPALS, "ana": {"tenant": "default", "groups": ["public"], "roles": ["operator"],
                                        "token_sha256": token_digest("ana-secret")},
                  "carol": {**PRINCIPALS["carol"], "token_sha256": token_digest("carol-secret")}}
    (settings.home / "principals.json").write_text(json.dumps(principals), "utf-8")
    _unchanged(settings, lambda: decide(settings, decision="approve", operator="ana"),
               AccessDenied, "operator's access token")
    _unchanged(settings, lambda: decide(settings, decision="approve", access_token="guess"),
               AccessDenied, "invalid access token")
    _unchanged(settings, lambda: decide(settings, decision="approve", access_token="carol-secret"),
               AccessDenied, "operator")
    decision, after = decide(settings, decision="approve", access_token="ana-secret", operator="someone else")
    assert (decision.actor, decision.authenticated) == ("ana", True) and after.serving == "g0002"


def test_a_timeout_leaves_the_candidate_staged_and_says_so(settings):
    layout = layout_of(settings)
    decision, after = record_timeout(layout, "g0002", 60, "release-gate", "run-1")
    assert after.serving == "g0001" and "g0002" not in after.retired and "g0002" in tagged_generations(layout)
    event = after.history[-1]
    assert event.action == "gate-timeout" and "stays staged" in event.reason and event.to_generation == "g0002"
    assert decision.action == "timeout"
    record = build_release_record(layout, "g0002", decision, after, after, newest_arrival(layout, "g0002"))
    assert record.freshness.answerable_at is None and record.freshness.seconds is None
    assert "not answerable after this decision" in release_record_markdown(record)


def test_approve_and_canary_of_a_candidate_whose_base_no_longer_serves_are_refused_with_words(stale):
    assert read_routing(layout_of(stale)).serving == "g0003"
    _unchanged(stale, lambda: decide(stale, decision="approve"), DecisionRefused,
               "g0003 was published since g0002 was built on g0001: what it brought is not in g0002; "
               "approving it would take that out of service. Decide rebase")
    _unchanged(stale, lambda: decide(stale, decision="canary", canary_groups=["staff"]), DecisionRefused,
               "a canary would hide it from those groups")


def test_a_rebase_retires_the_stale_candidate_and_the_record_says_what_was_published_since(stale):
    layout = layout_of(stale)
    before = read_routing(layout)
    decision, after = decide(stale, decision="rebase", reason="rebuild it on g0003")
    assert after.serving == "g0003" and "g0002" in after.retired
    event = after.history[-1]
    assert (event.action, event.to_generation) == ("rebase", "g0002")
    assert "g0003 was published since g0002" in event.reason and "rebuilt on g0003" in event.reason
    record = build_release_record(layout, "g0002", decision, before, after, newest_arrival(layout, "g0002"),
                          refused=["approve: g0003 was published since …"])
    assert record.published_since == ["g0003"] and record.decision.action == "rebase"
    text = release_record_markdown(record)
    assert "published since g0002 was built on g0001: g0003" in text and "refused before: approve" in text


def test_a_rebase_is_refused_while_the_base_still_serves(settings):
    _unchanged(settings, lambda: decide(settings, decision="rebase"), DecisionRefused,
               "g0002 was built on g0001, which still serves: nothing to rebase on")


def test_an_operators_promote_of_a_stale_candidate_goes_on_and_says_what_it_leaves_out(stale):
    from flows.operate import PromoteParams, promote

    layout = layout_of(stale)
    routing = promote(PromoteParams(generation="g0002", reason="the older export on purpose"), settings=stale)
    assert routing.serving == "g0002"  # an explicit act: allowed, unlike a gate's approval
    event = routing.history[-1]
    assert event.reason == ("the older export on purpose (note: g0003 was published since g0002 was "
                            "built on g0001: what it brought is not in g0002)")
    [path] = sorted(layout.releases.glob("g0002-*.yaml"))
    record = yaml.safe_load(path.read_text("utf-8"))
    assert record["published_since"] == ["g0003"] and record["decision"]["action"] == "promote"
