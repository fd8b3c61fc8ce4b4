"""Authorization before candidate generation: a tenant-B document that would rank first for a
tenant-A question appears nowhere in what tenant A's question touches."""
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from flows.ask import AskParams, ask
from flows.release import ReleaseOptions, release
from schemas.indexes import IndexSettings
from schemas.retrieval import AccessDenied
from schemas.settings import LlmSettings
from tasks.llm.registry import make_provider
from tasks.query.loop import answer_question
from tasks.query.principals import resolve_principal
from tasks.query.retriever import Retriever
from tasks.store.layout import StoreLayout
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records

MARKER = "Hyacinthe Vautrin-Lespinasse"
QUESTION = "Pourquoi le débat sur les blés a-t-il été renvoyé à jeudi malgré les cultivateurs de la Brie ?"
SECRET = {"doc_id": "jo-1887-03-02-comite", "corpus": "journal_officiel", "date": "1887-03-02",
          "tenant": "tenant-b", "groups": ["public"],
          "text": f"Comité secret. Le débat sur les blés a été renvoyé à jeudi, malgré les cultivateurs "
                  f"de la Brie, parce que M. {MARKER} a obtenu du ministre de l'agriculture un délai "
                  "pour négocier les droits sur les blés avec les cultivateurs de la Brie."}


@dataclass
class RecordingProvider:
    """The offline policy, recording every request a model would have been sent."""

    inner: object
    requests: list = field(default_factory=list)

    @property
    def name(self):
        return self.inner.name

    @property
    def model(self):
        return self.inner.model

    def complete(self, request):
        self.requests.append({"purpose": request.purpose, "messages": request.messages,
                              "context": request.context})
        return self.inner.complete(request)


# Every test runs on a generation searched exactly and on one with the ANN index forced on
# (threshold 0, no exact path for few allowed rows): the prefilter must hold for both.
ANN_FORCED = IndexSettings(ann_min_rows=0, exact_below_allowed=0)


@pytest.fixture(params=["exact", "ann"])
def two_tenants(request, tmp_path: Path, home: Path):
    (home / "principals.json").write_text(json.dumps({
        "alice": {"tenant": "tenant-a", "groups": ["public"]},
        "bob": {"tenant": "tenant-b", "groups": ["public"]}}), "utf-8")
    settings = settings_for(home, **({"index": ANN_FORCED} if request.param == "ann" else {}))
    export = write_records(tmp_path / "x.jsonl", [*SAMPLE_RECORDS, SECRET])
    release(paths=[str(export)], options=ReleaseOptions(tenant="tenant-a"), settings=settings)
    if request.param == "ann":  # the index is really there and really used
        r = Retriever.open(settings, resolve_principal(settings, "alice"))
        assert r.dense_plan.use_index(1) and not r.index_flags
    time.sleep(0.05)
    return settings, time.time()


def _leaks(value) -> bool:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return MARKER in text or SECRET["doc_id"] in text


def test_the_other_tenants_document_would_rank_first(two_tenants):
    settings, _ = two_tenants
    bob = Retriever.open(settings, resolve_principal(settings, "bob"))
    assert bob.warm_start(QUESTION, k=5)[0].doc_id == SECRET["doc_id"]


def test_no_channel_or_tool_of_tenant_a_sees_it(two_tenants):
    settings, _ = two_tenants
    r = Retriever.open(settings, resolve_principal(settings, "alice"))
    found = [*r.warm_start(QUESTION, k=50, date="1887-03-02"), *r.bm25_docs(QUESTION, 50),
             *r.dense_docs(QUESTION, 50), *r.temporal_docs("1887-03-02", 50),
             *r.bm25_chunks(QUESTION, 50), *r.dense_chunks(QUESTION, 50),
             *r.date_range_chunks("1887-03-01", "1887-03-03", 50, query=QUESTION),
             *r.substring_chunks(MARKER, 50), *r.substring_chunks("Comité secret", 50)]
    assert found and not any(h.doc_id == SECRET["doc_id"] for h in found)


def test_prompts_package_record_and_logs_stay_inside_the_allowed_set(two_tenants, caplog):
    settings, _ = two_tenants
    layout = StoreLayout.from_settings(settings)
    alice = resolve_principal(settings, "alice")
    provider = RecordingProvider(make_provider(LlmSettings(provider="rules")))
    with caplog.at_level(logging.DEBUG):
        package = answer_question(Retriever.open(settings, alice), QUESTION, provider, settings.query,
                                  layout=layout, principal=alice.model_dump())
    assert package.documents and provider.requests
    assert not _leaks([d.model_dump() for d in package.documents])
    assert not _leaks(provider.requests)
    assert not _leaks(json.loads(Path(package.record).read_text("utf-8")))
    assert not any(MARKER in r.getMessage() or SECRET["doc_id"] in r.getMessage() for r in caplog.records)


def test_ask_flow_artifacts_and_files_written_stay_inside_the_allowed_set(two_tenants, home: Path):
    settings, ingested_at = two_tenants
    package = ask(AskParams(question=QUESTION, principal="alice", provider="rules"), settings=settings)
    assert package.documents and not _leaks(package.model_dump())
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts()
    ours = [a for a in artifacts if a.key == "ask-evidence"]
    assert ours and not any(_leaks(a.data) for a in artifacts)
    # nothing written by the question (records, caches) mentions it; the generation's own
    # index files (LanceDB, lineage, the per-generation BM25 index) hold every tenant by design
    written = [p for p in home.rglob("*") if p.is_file() and p.stat().st_mtime > ingested_at
               and not {"lance", "lineage", "indexes"} & set(p.relative_to(home).parts)]
    assert written and not any(MARKER.encode() in p.read_bytes() for p in written)


def test_an_unknown_principal_is_refused(two_tenants):
    settings, _ = two_tenants
    with pytest.raises(AccessDenied):
        resolve_principal(settings, "mallory")
