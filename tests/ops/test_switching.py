"""Promote, roll back and concurrent publishes against real generations."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flows.operate import PromoteParams, RollbackParams, promote, rollback
from flows.release import ReleaseOptions, release
from schemas.generation import RoutingRecord
from schemas.retrieval import Principal
from schemas.settings import PROJECT_ROOT
from tasks.ops.switching import GenerationUnavailable
from tasks.query.retriever import Retriever
from tasks.store.layout import StoreLayout
from tasks.store.routing import read_routing
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records

QUESTIONS = ["débat sur les blés renvoyé à jeudi", "cultivateurs de la Brie", "projet de loi sur les sucres",
             "raffineries du Nord enquête"]
PUBLIC = Principal(principal_id="default", tenant="default", groups=["public"])


def ranked_ids(settings) -> list[list[str]]:
    retriever = Retriever.open(settings, PUBLIC)
    return [[h.doc_id for h in retriever.warm_start(q, k=10)] for q in QUESTIONS]


def _two_generations(home: Path, inputs: Path) -> None:
    settings = settings_for(home)
    release(paths=[str(write_records(inputs / "a.jsonl", SAMPLE_RECORDS[:3]))], settings=settings)
    edited = [dict(r) for r in SAMPLE_RECORDS]
    edited[1]["text"] = "Une chronique mondaine sans rapport avec la Chambre."
    release(paths=[str(write_records(inputs / "b.jsonl", edited))],
            options=ReleaseOptions(promote=False), settings=settings)


@pytest.fixture
def two_generations(home_templates, home: Path):
    """g0001 serving, g0002 staged beside it (a copy of one session-wide build)."""
    return settings_for(home_templates.copy("switching-two-generations", _two_generations, home))


def test_rollback_after_a_bad_promotion_restores_the_previous_answers_exactly(two_generations):
    settings = two_generations
    before = ranked_ids(settings)
    promote(PromoteParams(generation="g0002", reason="new intake"), settings=settings)
    assert ranked_ids(settings) != before  # the promotion really changed answers
    rollback(RollbackParams(reason="bad promotion"), settings=settings)
    assert ranked_ids(settings) == before
    routing = read_routing(StoreLayout.from_settings(settings))
    assert [(e.action, e.from_generation, e.to_generation) for e in routing.history] == [
        ("publish", None, "g0001"), ("promote", "g0001", "g0002"), ("rollback", "g0002", "g0001")]
    assert routing.history[-1].reason == "bad promotion" and routing.history[-1].actor


def test_promote_refuses_unknown_generations_and_rollback_needs_a_predecessor(two_generations):
    settings = two_generations
    with pytest.raises(GenerationUnavailable):
        promote(PromoteParams(generation="g0042"), settings=settings)
    with pytest.raises(GenerationUnavailable):
        rollback(RollbackParams(), settings=settings)  # g0001 is the first ever served


def _ingest_process(home: Path, export: Path, prefect_home: Path, prefect: dict[str, str]) -> subprocess.Popen:
    # both report to the session's server (cli_prefect): a temporary server each, on a new
    # database, would cost more than the publish under test
    env = dict(os.environ, MABILLON_HOME=str(home), PREFECT_HOME=str(prefect_home), **prefect)
    return subprocess.Popen([sys.executable, "-m", "flows.cli", "ingest", str(export), "--json"],
                            cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_two_concurrent_publishes_serialise_and_never_tear_the_routing_record(tmp_path: Path, home: Path,
                                                                          cli_prefect):
    layout = StoreLayout.from_settings(settings_for(home))
    release(paths=[str(write_records(tmp_path / "seed.jsonl", SAMPLE_RECORDS[:1]))], settings=settings_for(home))
    a = write_records(tmp_path / "a.jsonl", SAMPLE_RECORDS[1:3])
    b = write_records(tmp_path / "b.jsonl", SAMPLE_RECORDS[3:])
    seen, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            # every read parses: the record is replaced by rename, never written in place
            seen.append(RoutingRecord.model_validate_json(layout.routing.read_text("utf-8")).serving)
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    procs = [_ingest_process(home, export, tmp_path / f"prefect-{n}", cli_prefect.client_env())
             for n, export in enumerate((a, b))]
    outs = [p.communicate(timeout=900) for p in procs]
    stop.set()
    watcher.join()
    assert all(p.returncode == 0 for p in procs), [o[1].decode()[-2000:] for o in outs]
    results = [json.loads(o[0]) for o in outs]
    assert sorted(r["generation"] for r in results) == ["g0002", "g0003"]
    final = read_routing(layout)
    assert [e.to_generation for e in final.history] == ["g0001", "g0002", "g0003"]
    # serialised: the later publish built on the earlier one, so it serves every source
    assert max(results, key=lambda r: r["generation"])["counts"]["sources"] == len(SAMPLE_RECORDS)
    assert set(seen) <= {"g0001", "g0002", "g0003"} and len(seen) > 10


def test_shadow_compares_a_staged_generation_with_the_serving_one(two_generations, tmp_path: Path):
    from tasks.ops.shadow import ShadowQuestion, shadow_compare

    questions = [ShadowQuestion(question_id="q1", question=QUESTIONS[0],
                                gold_ids=["gaulois-1887-03-03", "jo-1887-03-02"]),
                 ShadowQuestion(question_id="q2", question=QUESTIONS[2])]
    report = shadow_compare(two_generations, PUBLIC, "g0002", questions)
    assert (report.staged, report.serving, report.n) == ("g0002", "g0001", 2)
    first = report.rows[0]
    # g0002 rewrote the Gaulois article away from the subject: it falls in the staged ranking
    assert first.staged.index("gaulois-1887-03-03") > first.serving.index("gaulois-1887-03-03")
    assert first.recall_serving == 1.0 and report.rows[1].recall_staged is None
    # serving holds 3 documents, staged 4 (a superset): top-10 lists share 3 of 10 slots
    assert report.mean_overlap == pytest.approx(0.3)
    assert report.latency_staged_median_s > 0 and report.latency_serving_p95_s > 0


def test_rollback_across_embedding_spaces_switches_the_query_encoder_with_the_index(tmp_path: Path, home: Path):
    from schemas.embedding import EmbeddingSpaceMismatch
    from schemas.settings import EmbeddingSettings

    export = write_records(tmp_path / "a.jsonl", SAMPLE_RECORDS)
    e5 = settings_for(home, embedding=EmbeddingSettings(model="e5"))
    release(paths=[str(export)], settings=e5)
    minilm = settings_for(home, embedding=EmbeddingSettings(model="minilm"))
    result = release(paths=[str(export)], settings=minilm)  # same sources, another space: all re-embedded
    assert result.published and result.run.unchanged == len(SAMPLE_RECORDS)
    plain = settings_for(home)  # no encoder configured: it follows the serving generation
    assert Retriever.open(plain, PUBLIC).space_id == Retriever.open(minilm, PUBLIC).space_id
    rollback(RollbackParams(reason="back to e5"), settings=plain)
    assert Retriever.open(plain, PUBLIC).space_id == Retriever.open(e5, PUBLIC).space_id
    assert ranked_ids(plain)[0]
    with pytest.raises(EmbeddingSpaceMismatch):
        Retriever.open(minilm, PUBLIC)  # an explicit encoder of another space is refused
