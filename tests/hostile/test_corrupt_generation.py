"""A generation torn on disk (a LanceDB data file or a Parquet lineage file truncated) is found
by its recorded digests before it is served, refused with a clear error, and the generation
that served before keeps serving."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.release import ReleaseOptions, release
from tasks.access.principals import default_principal
from tasks.ops.switching import promote, rollback
from tasks.query.retriever import Retriever
from tasks.store import integrity
from tasks.store.integrity import CorruptGeneration, digests_path, generation_files, verify_generation
from tasks.store.layout import StoreLayout
from tasks.store.routing import read_routing
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records

pytestmark = pytest.mark.slow

EXTRA = {"doc_id": "jo-1887-03-12", "corpus": "journal_officiel", "date": "1887-03-12",
         "text": "PRÉSIDENCE DE M. FLOQUET. Suite de la discussion sur les sucres ; la clôture est prononcée."}


def _two_generations(home: Path, inputs: Path) -> None:
    settings = settings_for(home)
    release(paths=[str(write_records(inputs / "a.jsonl", SAMPLE_RECORDS))], settings=settings)
    release(paths=[str(write_records(inputs / "b.jsonl", [*SAMPLE_RECORDS, EXTRA]))],
            options=ReleaseOptions(promote=False), settings=settings)


@pytest.fixture
def two_generations(home_templates, home: Path):
    """g0001 serving; g0002 published beside it, not promoted (a copy of one session-wide build)."""
    settings = settings_for(home_templates.copy("corrupt-two-generations", _two_generations, home))
    layout = StoreLayout.from_settings(settings)
    assert read_routing(layout).serving == "g0001"
    return settings, layout


def truncate(location) -> None:
    path = location.local_path
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def answers(settings) -> list[str]:
    retriever = Retriever.open(settings, default_principal(settings))
    return [h.doc_id for h in retriever.warm_start("débat sur les blés renvoyé à jeudi", 5)]


def test_digests_of_every_file_are_recorded_at_publish(two_generations):
    _, layout = two_generations
    recorded = json.loads(digests_path(layout, "g0002").read_text("utf-8"))
    names = set(recorded)
    assert {f"lineage/g0002/{t}.parquet" for t in ("sources", "revisions", "pages", "elements", "chunks", "vectors")} <= names
    assert any(n.startswith("lance/chunks.lance/data/") for n in names)
    verify_generation(layout, "g0002")


@pytest.mark.parametrize("which", ["lance", "lineage"])
def test_a_truncated_file_refuses_the_promotion_and_the_serving_generation_stays(two_generations, which):
    settings, layout = two_generations
    before = answers(settings)
    files = generation_files(layout, "g0002")
    name = next(n for n in files if n.startswith("lance/chunks.lance/data/" if which == "lance"
                                                  else "lineage/g0002/chunks"))
    truncate(files[name])
    with pytest.raises(CorruptGeneration) as refused:
        promote(layout, "g0002", "tester")
    message = str(refused.value)
    assert message.startswith("generation g0002 is not served: ") and "mabillon rollback" in message
    assert (name in message) or "cannot be read" in message
    assert read_routing(layout).serving == "g0001"
    assert answers(settings) == before  # still answering from g0001
    integrity._VERIFIED.clear()
    with pytest.raises(CorruptGeneration):  # and no query opens it either
        Retriever.open(settings, default_principal(settings), generation="g0002")


def test_a_serving_generation_torn_after_promotion_is_refused_and_rollback_restores(two_generations):
    settings, layout = two_generations
    promote(layout, "g0002", "tester")
    integrity._VERIFIED.clear()
    truncate(next(loc for n, loc in generation_files(layout, "g0002").items() if n.endswith("pages.parquet")))
    with pytest.raises(CorruptGeneration, match="pages.parquet"):
        Retriever.open(settings, default_principal(settings))
    rollback(layout, "tester")
    assert read_routing(layout).serving == "g0001" and answers(settings)


def test_a_file_torn_between_write_and_switch_is_never_switched_to(two_generations, tmp_path, monkeypatch):
    settings, layout = two_generations
    from tasks.ingest import publish

    written = publish.write_generation

    def write_then_tear(layout, generation, *args, **kwargs):
        manifest = written(layout, generation, *args, **kwargs)
        truncate(next(loc for n, loc in generation_files(layout, generation).items()
                      if n.startswith("lance/chunks.lance/data/")))
        return manifest

    monkeypatch.setattr("tasks.ingest.publish.write_generation", write_then_tear)
    extra = dict(EXTRA, doc_id="jo-1887-03-14", text=EXTRA["text"] + " Séance levée.")
    with pytest.raises(CorruptGeneration):
        release(paths=[str(write_records(tmp_path / "c.jsonl", [extra]))], settings=settings)
    assert read_routing(layout).serving == "g0001" and answers(settings)
