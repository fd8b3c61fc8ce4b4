"""Canary routing: named groups see a candidate, everyone else the serving generation; promotion
and rollback end it; deletion masks reach every route; bad requests change nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.operate import CanaryParams, DeleteParams, PromoteParams, RollbackParams, canary, delete, promote, rollback
from schemas.settings import PROJECT_ROOT
from tasks.access.principals import resolve_principal
from tasks.ops.canary import CanaryRefused
from tasks.ops.switching import GenerationUnavailable
from tasks.query.retriever import Retriever
from tasks.store.layout import StoreLayout
from tasks.store.release_records import read_release_records
from tasks.store.routing import read_routing
from tests.conftest import settings_for
from tests.ops.gate_helpers import CANDIDATE_RECORD, build_base, copy_home

QUESTION = "débat sur les blés jeudi Brie amendements"


@pytest.fixture(scope="module")
def base_home(tmp_path_factory) -> Path:
    return build_base(tmp_path_factory.mktemp("canary-base"))


@pytest.fixture
def settings(base_home, tmp_path):
    return settings_for(copy_home(base_home, tmp_path / "home"))


def _open(settings, who):
    return Retriever.open(settings, resolve_principal(settings, who))


def test_the_canary_group_gets_the_candidate_and_everyone_else_the_serving_one(settings):
    routing = canary(CanaryParams(generation="g0002", groups=["staff"], reason="first look"), settings=settings)
    assert routing.serving == "g0001" and [(c.generation, c.groups) for c in routing.canaries] == [("g0002", ["staff"])]
    assert routing.history[-1].action == "canary" and routing.history[-1].groups == ["staff"]
    carol, alice = _open(settings, "carol"), _open(settings, "alice")
    assert (carol.generation, carol.route) == ("g0002", "canary")
    assert (alice.generation, alice.route) == ("g0001", "serving")
    assert CANDIDATE_RECORD["doc_id"] in {h.doc_id for h in carol.bm25_docs(QUESTION, 10)}
    assert CANDIDATE_RECORD["doc_id"] not in {h.doc_id for h in alice.bm25_docs(QUESTION, 10)}
    record = read_release_records(StoreLayout.from_settings(settings), "g0002")[-1]
    assert record.decision.action == "canary" and record.decision.canary_groups == ["staff"]
    assert record.freshness.answerable_at == routing.canaries[0].since


@pytest.mark.parametrize("end", ["promote", "rollback", "stop"])
def test_promotion_rollback_and_stop_end_the_canary(settings, end):
    canary(CanaryParams(generation="g0002", groups=["staff"]), settings=settings)
    if end == "promote":
        routing = promote(PromoteParams(generation="g0002", reason="canary went well"), settings=settings)
    elif end == "rollback":
        routing = rollback(RollbackParams(to="g0001", reason="back"), settings=settings)
    else:
        routing = canary(CanaryParams(stop=True, reason="enough"), settings=settings)
    assert routing.canaries == []
    assert "canary-end" in [e.action for e in routing.history[-2:]]
    carol = _open(settings, "carol")
    assert carol.route == "serving" and carol.generation == routing.serving


def _routing_bytes(settings) -> bytes:
    return StoreLayout.from_settings(settings).routing.read_bytes()


@pytest.mark.parametrize("params, error, message", [
    (CanaryParams(generation="g0002", groups=["nobody-has-this"]), CanaryRefused, "no principal holds"),
    (CanaryParams(generation="g0002", groups=[]), CanaryRefused, "at least one group"),
    (CanaryParams(generation="g0001", groups=["staff"]), CanaryRefused, "already serves everyone"),
    (CanaryParams(generation="g0042", groups=["staff"]), GenerationUnavailable, "no generation 'g0042'"),
    (CanaryParams(generation="g0002", groups=["staff' OR '1'='1"]), CanaryRefused, "invalid group"),
])
def test_bad_canary_requests_are_refused_and_change_nothing(settings, params, error, message):
    before = _routing_bytes(settings)
    with pytest.raises(error, match=message):
        canary(params, settings=settings)
    assert _routing_bytes(settings) == before
    assert not list(StoreLayout.from_settings(settings).releases.glob("g0002-*.yaml"))


def test_a_group_routes_to_one_candidate_at_most(settings, tmp_path):
    from flows.release import ReleaseOptions, release
    from tests.conftest import write_records

    canary(CanaryParams(generation="g0002", groups=["staff"]), settings=settings)
    release(paths=[str(write_records(tmp_path / "c.jsonl", [{**CANDIDATE_RECORD, "doc_id": "x-1"}]))],
            options=ReleaseOptions(promote=False), settings=settings)
    before = _routing_bytes(settings)
    with pytest.raises(CanaryRefused, match="staff → g0002"):
        canary(CanaryParams(generation="g0003", groups=["staff"]), settings=settings)
    assert _routing_bytes(settings) == before


def test_a_canary_principal_never_sees_what_another_route_deleted(settings):
    canary(CanaryParams(generation="g0002", groups=["staff"]), settings=settings)
    doomed = "gaulois-1887-03-03"
    assert doomed in {h.doc_id for h in _open(settings, "carol").bm25_docs(QUESTION, 20)}
    result = delete(DeleteParams(doc_ids=[doomed], reason="rights"), settings=settings)
    routing = read_routing(StoreLayout.from_settings(settings))
    assert routing.serving == result.generation != "g0001"
    assert [c.generation for c in routing.canaries] == ["g0002"]  # the canary goes on
    carol = _open(settings, "carol")
    assert carol.generation == "g0002"
    hits = [*carol.bm25_docs(QUESTION, 50), *carol.dense_docs(QUESTION, 50), *carol.warm_start(QUESTION, 50),
            *carol.temporal_docs("1887-03-03", 50), *carol.substring_chunks("Palais-Bourbon", 50),
            *carol.date_range_chunks("1887-03-01", "1887-03-05", 50)]
    assert hits and doomed not in {h.doc_id for h in hits}
    # and not merely masked: purged from the candidate's own data too
    from tasks.store.lance_store import open_generation_table

    assert doomed not in open_generation_table(StoreLayout.from_settings(settings), "g0002").to_arrow()["doc_id"].to_pylist()


def test_gc_keeps_the_canary_generation(settings):
    from flows.operate import gc

    canary(CanaryParams(generation="g0002", groups=["staff"]), settings=settings)
    report = gc(settings=settings.model_copy(update={"retention": settings.retention.model_copy(
        update={"keep_last": 0})}))
    assert "g0002" in report.kept and "g0001" in report.kept


@pytest.mark.slow  # CLI processes with their servers: end-to-end
def test_the_cli_starts_a_canary_and_refuses_an_unknown_group(settings, cli_prefect):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "flows.cli", *args, "--home", str(settings.home), "--json"],
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
                              env={**os.environ, **cli_prefect.client_env()})

    before = _routing_bytes(settings)
    bad = cli("canary", "g0002", "--groups", "ghosts")
    assert bad.returncode == 2 and "no principal holds group(s) ghosts" in bad.stderr  # a usage error
    assert _routing_bytes(settings) == before
    done = cli("canary", "g0002", "--groups", "staff", "--reason", "first look")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["canaries"][0]["groups"] == ["staff"]
    listed = {g["generation"]: g["status"] for g in json.loads(cli("generations").stdout)}
    assert listed == {"g0001": "serving", "g0002": "canary"}
