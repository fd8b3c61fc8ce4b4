"""The query encoder compiled to ONNX by a release: the same space as the reference engine,
verified, used by query processes without torch, and never trusted when it does not match."""
from __future__ import annotations

import json
import logging
import subprocess
import sys

import numpy as np
import pytest

# imported here, not in a test: importing Prefect replaces the root logger's handlers, caplog's
# among them, so a test that imported it first saw no warning when it ran first in its process
from flows.release import release
from schemas.embedding import CompiledEncoder, EmbeddingInputTooLong
from schemas.settings import MabillonSettings, PROJECT_ROOT
from tasks import compiled_encoder as ce
from tasks.embedding import SentenceTransformerEmbedder
from tasks.query.retriever import Retriever
from tasks.store.layout import StoreLayout
from tests.conftest import SAMPLE_RECORDS, write_records
from schemas.retrieval import Principal

READER = Principal(principal_id="reader", tenant="default", groups=["public"])  # the records' defaults
QUESTIONS = ["Qui présidait la séance du 2 mars 1887 ?", "Que dit la presse du débat sur les blés ?",
             "raffineries du Nord", "Méline rapporteur sucres"]


def compiling(home, **overrides) -> MabillonSettings:
    settings = MabillonSettings(home=home, **overrides)
    settings.embedding.compile_query_encoder = True
    return settings


@pytest.fixture(scope="module")
def compiled_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("compiled-home")
    release([str(write_records(home / "export.jsonl", SAMPLE_RECORDS))], settings=compiling(home))
    return home


def opened(home, **overrides) -> Retriever:
    ce._open_compiled.cache_clear()  # each test sees the files as they are now
    return Retriever.open(MabillonSettings(home=home, **overrides), READER)


def encoder_of(retriever: Retriever):
    return retriever.search.embed_queries.__self__


def test_a_release_compiles_a_verified_encoder_of_its_space(compiled_home):
    layout = StoreLayout.from_settings(MabillonSettings(home=compiled_home))
    [folder] = layout.encoders.subfolders()
    record = CompiledEncoder.model_validate_json((folder / ce.RECORD).read_text())
    retriever = opened(compiled_home)
    assert folder.name == retriever.space_id == record.space.space_id
    assert record.probes == len(ce.PROBES) and record.max_abs_diff <= ce.MAX_ABS_DIFF
    assert record.min_cosine >= ce.MIN_COSINE and record.runtime.startswith("onnxruntime ")
    assert isinstance(encoder_of(retriever), ce.OnnxQueryEncoder)


def test_compiled_vectors_and_rankings_are_the_reference_ones(compiled_home):
    compiled = opened(compiled_home)
    reference = opened(compiled_home, embedding={"query_engine": "reference"})
    assert isinstance(encoder_of(reference), SentenceTransformerEmbedder)
    assert encoder_of(compiled).space == encoder_of(reference).space
    got, want = encoder_of(compiled).embed_queries(QUESTIONS), encoder_of(reference).embed_queries(QUESTIONS)
    assert got.dtype == np.float32 and np.abs(got - want).max() <= 1e-5
    for q in QUESTIONS:
        assert compiled.warm_start(q, k=4)
        assert [h.doc_id for h in compiled.warm_start(q, k=4)] == [h.doc_id for h in reference.warm_start(q, k=4)]


def test_an_over_limit_question_is_refused_not_cut(compiled_home):
    encoder = encoder_of(opened(compiled_home))
    with pytest.raises(EmbeddingInputTooLong, match="256"):
        encoder.embed_queries(["séance " * 300])


def test_a_cold_query_process_does_not_import_torch(compiled_home):
    code = (
        "import sys, json\n"
        "from schemas.settings import MabillonSettings\n"
        "from schemas.retrieval import Principal\n"
        "from tasks.query.retriever import Retriever\n"
        f"r = Retriever.open(MabillonSettings(home={str(compiled_home)!r}), Principal(principal_id='p', tenant='default', groups=['public']))\n"
        "hits = r.warm_start('Qui présidait la séance du 2 mars 1887 ?', k=2)\n"
        "print(json.dumps({'hits': [h.doc_id for h in hits], 'loaded': sorted(m for m in "
        "('torch', 'transformers', 'sentence_transformers') if m in sys.modules)}))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True,
                         timeout=300, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["loaded"] == [] and result["hits"][0] == "jo-1887-03-02"


def test_a_changed_graph_is_not_trusted(compiled_home, tmp_path, caplog):
    import shutil

    home = tmp_path / "copy"
    shutil.copytree(compiled_home, home)
    [folder] = StoreLayout.from_settings(MabillonSettings(home=home)).encoders.subfolders()
    graph = folder.local_path / ce.MODEL
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the weights
    graph.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="tasks.compiled_encoder"):
        retriever = opened(home)
    assert isinstance(encoder_of(retriever), SentenceTransformerEmbedder)
    assert "does not match its record" in caplog.text
    assert retriever.warm_start(QUESTIONS[0], k=1)[0].doc_id == "jo-1887-03-02"


def test_a_graph_that_differs_from_the_reference_is_not_kept(compiled_home, tmp_path, monkeypatch, caplog):
    from tasks.embedding import load_embedder

    embedder = load_embedder(MabillonSettings(home=compiled_home).embedding)
    monkeypatch.setattr(ce, "MAX_ABS_DIFF", -1.0)  # no graph can pass: the rejection path
    folder = StoreLayout.from_settings(MabillonSettings(home=tmp_path)).encoder_dir(embedder.space.space_id)
    with caplog.at_level(logging.WARNING, logger="tasks.compiled_encoder"):
        assert ce.compile_query_encoder(embedder, folder) is None
    assert "rejected" in caplog.text and not folder.exists()


def test_an_older_home_gets_its_encoder_on_the_next_unchanged_ingest(tmp_path):
    export = write_records(tmp_path / "export.jsonl", SAMPLE_RECORDS[:2])
    home = tmp_path / "home"
    plain = MabillonSettings(home=home)
    first = release([str(export)], settings=plain)  # published without one (compile off)
    layout = StoreLayout.from_settings(plain)
    assert layout.encoders.subfolders() == []
    again = release([str(export)], settings=compiling(home))
    assert again.generation == first.generation and again.run.unchanged == 2
    assert [f.name for f in layout.encoders.subfolders()] == [opened(home).space_id]


def test_gc_removes_encoders_of_spaces_no_generation_uses(compiled_home, tmp_path):
    import shutil

    from tasks.ops.retention import remove_unused_encoders

    home = tmp_path / "copy"
    shutil.copytree(compiled_home, home)
    layout = StoreLayout.from_settings(MabillonSettings(home=home))
    [kept] = layout.encoders.subfolders()
    stale = layout.encoder_dir("0123456789abcdef")
    shutil.copytree(kept.local_path, stale.local_path)
    assert remove_unused_encoders(layout, ["g0001"]) == 1
    assert [f.name for f in layout.encoders.subfolders()] == [kept.name]


def test_a_missing_graph_file_falls_back_to_the_reference(compiled_home, tmp_path, caplog):
    import shutil

    home = tmp_path / "copy"
    shutil.copytree(compiled_home, home)
    [folder] = StoreLayout.from_settings(MabillonSettings(home=home)).encoders.subfolders()
    (folder.local_path / ce.MODEL).unlink()
    with caplog.at_level(logging.WARNING, logger="tasks.compiled_encoder"):
        retriever = opened(home)
    assert isinstance(encoder_of(retriever), SentenceTransformerEmbedder) and "unreadable" in caplog.text


def test_a_failing_compile_never_fails_the_release(tmp_path, monkeypatch, caplog):
    def broken(embedder, folder, threads=None):
        folder.mkdir()
        (folder / ce.MODEL).write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(ce, "compile_query_encoder", broken)
    home = tmp_path / "home"
    with caplog.at_level(logging.WARNING, logger="tasks.compiled_encoder"):
        result = release([str(write_records(tmp_path / "e.jsonl", SAMPLE_RECORDS[:1]))], settings=compiling(home))
    assert result.serving and "not compiled (OSError: disk full)" in caplog.text
    assert StoreLayout.from_settings(MabillonSettings(home=home)).encoders.subfolders() == []
