"""Load and races: 8 concurrent questions while a release runs give the answers they give
alone, in bounded memory; the same source delivered by two ingests at once, and the same
source twice in one batch, leave one revision each and no duplicate chunk."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from flows.release import release
from schemas.settings import PROJECT_ROOT
from tasks.access.principals import default_principal
from tasks.llm.rules import RulesProvider
from tasks.query.loop import answer_question
from tasks.query.retriever import Retriever
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table
from tasks.store.routing import read_routing
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records
from tests.flows.test_crash_safety import _more_records

pytestmark = pytest.mark.slow

QUESTIONS = ["Quand le débat sur les blés a-t-il été renvoyé à jeudi ?",
             "Qui présidait la séance du 2 mars 1887 ?",
             "Que dit Le Gaulois de M. Clémenceau ?",
             "Quelle enquête demande-t-on sur les raffineries du Nord ?",
             "Que délibère le conseil municipal sur la voirie du hameau 7 ?",
             "Que reproche L'Intransigeant aux ministres ?",
             "Quel budget de l'école le conseil vote-t-il ?",
             "Qui est rapporteur du projet de loi sur les sucres ?"]


def ingest(home: Path, export: Path, tmp: Path, tag: str, prefect: dict[str, str]) -> subprocess.Popen:
    """`mabillon ingest`, its runs reported to `prefect` (the session's server, not one it starts)."""
    env = dict(os.environ, MABILLON_HOME=str(home), PREFECT_HOME=str(tmp / f"prefect-{tag}"), **prefect)
    return subprocess.Popen([sys.executable, "-m", "flows.cli", "ingest", str(export), "--json"],
                            cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def answers(settings, generation: str) -> list[list[str]]:
    layout = StoreLayout.from_settings(settings)

    def one(question):
        retriever = Retriever.open(settings, default_principal(settings), generation=generation)
        return [d.doc_id for d in answer_question(retriever, question, RulesProvider(), settings.query,
                                                  layout=layout).documents]
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, QUESTIONS))


def test_eight_concurrent_asks_during_a_release_answer_as_alone_in_bounded_memory(tmp_path, home, cli_prefect):
    settings = settings_for(home)
    release(paths=[str(write_records(tmp_path / "a.jsonl", _more_records()))], settings=settings)
    generation = read_routing(StoreLayout.from_settings(settings)).serving
    alone = answers(settings, generation)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    extra = [{**r, "doc_id": f"autre-{r['doc_id']}"} for r in _more_records()[4:30]]
    proc = ingest(home, write_records(tmp_path / "b.jsonl", extra), tmp_path, "load", cli_prefect.client_env())
    loaded = [answers(settings, generation) for _ in range(2)]
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert all(run == alone for run in loaded)
    assert json.loads(out)["generation"] == read_routing(StoreLayout.from_settings(settings)).serving != generation
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert grown_mb < 500, grown_mb  # 16 more questions on 8 threads: no per-question growth to speak of


def current_revisions(settings, generation: str) -> dict[str, int]:
    layout = StoreLayout.from_settings(settings)
    counts: dict[str, int] = {}
    for r in read_lineage_table(layout, generation, "revisions").to_pylist():
        counts[r["source_id"]] = counts.get(r["source_id"], 0) + 1
    return counts


def test_the_same_source_delivered_twice_at_once_gives_one_revision_and_no_duplicate(tmp_path, home, cli_prefect):
    export = write_records(tmp_path / "same.jsonl", SAMPLE_RECORDS)
    runs = [ingest(home, export, tmp_path, tag, cli_prefect.client_env()) for tag in ("one", "two")]
    results = []
    for proc in runs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err.decode()[-2000:]
        results.append(json.loads(out))
    # serialised by the release lock: one published g0001, the other found every source unchanged
    assert sorted(r["run"]["added"] for r in results) == [0, len(SAMPLE_RECORDS)]
    assert {r["generation"] for r in results} == {"g0001"}
    settings = settings_for(home)
    serving = read_routing(StoreLayout.from_settings(settings)).serving
    assert serving == "g0001"
    assert set(current_revisions(settings, serving).values()) == {1}
    chunks = read_lineage_table(StoreLayout.from_settings(settings), serving, "chunks")["chunk_id"].to_pylist()
    assert len(chunks) == len(set(chunks))


def test_the_same_source_twice_in_one_batch_with_different_bytes_keeps_the_first(tmp_path, home):
    first = dict(SAMPLE_RECORDS[0])
    second = {**first, "text": first["text"] + " Texte différent sous le même identifiant."}
    export = write_records(tmp_path / "twice.jsonl", [first, SAMPLE_RECORDS[1], second])
    folder = tmp_path / "versement"
    folder.mkdir()
    (folder / "note.txt").write_text("Note du conservateur sur le fonds.", "utf-8")
    settings = settings_for(home)
    result = release(paths=[str(export), str(folder), str(folder)], settings=settings)
    reasons = [q.reason for q in result.quarantined]
    assert any(r.startswith("line 3: duplicate doc_id") for r in reasons)
    assert any("duplicate source" in r for r in reasons)  # the folder given twice
    assert set(current_revisions(settings, result.generation).values()) == {1}
    layout = StoreLayout.from_settings(settings)
    texts = " ".join(read_lineage_table(layout, result.generation, "pages")["raw_text"].to_pylist())
    assert "Texte différent" not in texts
