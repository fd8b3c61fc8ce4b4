"""Authorization before candidate generation: a tenant-B document that would rank first for a
tenant-A question appears nowhere in what tenant A's question touches; nor do tenant-A documents
outside their validity interval (one under embargo, one withdrawn). Every test runs with a canary
active, once for a principal on the serving route and once for one on the canary route."""
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from flows.ask import AskParams, ask
from flows.release import ReleaseOptions, release
from schemas.indexes import IndexSettings
from schemas.retrieval import AccessDenied
from schemas.settings import LlmSettings
from tasks.access.principals import resolve_principal
from tasks.llm.registry import make_provider
from tasks.query.loop import answer_question
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
EMBARGO_MARKER, WITHDRAWN_MARKER = "Eudoxie Ravenel-Quatremaire", "Anselme Dufour-Vigneron"
# tenant A's own documents, as relevant as the secret one, but not valid now
EMBARGOED = {"doc_id": "jo-1887-03-02-reserve", "corpus": "journal_officiel", "date": "1887-03-02",
             "valid_from": "2099-01-01",
             "text": f"Note réservée. Le débat sur les blés a été renvoyé à jeudi, malgré les cultivateurs "
                     f"de la Brie, sur la demande de M. {EMBARGO_MARKER} auprès du ministre de "
                     "l'agriculture, pour les droits sur les blés et les cultivateurs de la Brie."}
WITHDRAWN = {"doc_id": "jo-1887-03-02-retire", "corpus": "journal_officiel", "date": "1887-03-02",
             "valid_to": "2001-01-01",
             "text": f"Pièce retirée. Le débat sur les blés a été renvoyé à jeudi, malgré les cultivateurs "
                     f"de la Brie, à cause de M. {WITHDRAWN_MARKER} et du ministre de l'agriculture, "
                     "pour les droits sur les blés et les cultivateurs de la Brie."}
HIDDEN = {d["doc_id"] for d in (SECRET, EMBARGOED, WITHDRAWN)}
MARKERS = (MARKER, EMBARGO_MARKER, WITHDRAWN_MARKER)
CANARY_RECORD = {"doc_id": "jo-1887-03-11", "corpus": "journal_officiel", "date": "1887-03-11",
                 "text": "PRÉSIDENCE DE M. FLOQUET. Suite de la discussion sur les sucres."}
ROUTES = {"alice": "serving", "carol": "canary"}


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


@pytest.fixture(scope="module", params=["exact", "ann"])
def two_tenants(request, tmp_path_factory):
    """g0001 serves everyone; g0002 (one more record) is a canary for the group `staff`."""
    from flows.operate import CanaryParams, canary

    tmp = tmp_path_factory.mktemp("access")
    home = tmp / "home"
    home.mkdir()
    (home / "principals.json").write_text(json.dumps({
        "alice": {"tenant": "tenant-a", "groups": ["public"]},
        "carol": {"tenant": "tenant-a", "groups": ["public", "staff"]},
        "dora": {"tenant": "tenant-a", "groups": ["public"], "roles": ["operator"]},
        "bob": {"tenant": "tenant-b", "groups": ["public"]}}), "utf-8")
    settings = settings_for(home, **({"index": ANN_FORCED} if request.param == "ann" else {}))
    export = write_records(tmp / "x.jsonl", [*SAMPLE_RECORDS, SECRET, EMBARGOED, WITHDRAWN])
    release(paths=[str(export)], options=ReleaseOptions(tenant="tenant-a"), settings=settings)
    more = write_records(tmp / "y.jsonl", [CANARY_RECORD])
    release(paths=[str(more)], options=ReleaseOptions(tenant="tenant-a", promote=False), settings=settings)
    routing = canary(CanaryParams(generation="g0002", groups=["staff"], reason="try"), settings=settings)
    assert routing.serving == "g0001" and routing.canaries[0].generation == "g0002"
    if request.param == "ann":  # the index is really there and really used, on both routes
        for who in ROUTES:
            r = Retriever.open(settings, resolve_principal(settings, who))
            assert r.dense_plan.use_index(1) and not r.index_flags
    return settings, files_of(home)


def files_of(home: Path) -> dict[Path, tuple[int, int]]:
    """Each file's (mtime_ns, size): what a test writes afterwards is what differs from this,
    whatever the clock's or the filesystem's timestamp granularity."""
    return {p: (st.st_mtime_ns, st.st_size) for p in home.rglob("*")
            if p.is_file() and (st := p.stat())}


@pytest.fixture(params=sorted(ROUTES))
def who(request) -> str:
    return request.param


def _leaks(value) -> bool:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return any(m in text for m in MARKERS) or any(d in text for d in HIDDEN)


def test_the_hidden_documents_would_rank_first(two_tenants):
    settings, _ = two_tenants
    bob = Retriever.open(settings, resolve_principal(settings, "bob"))
    assert bob.warm_start(QUESTION, k=5)[0].doc_id == SECRET["doc_id"]
    dora = resolve_principal(settings, "dora")  # an operator may look ahead, past the embargo
    assert EMBARGOED["doc_id"] in [h.doc_id for h in Retriever.open(settings, dora, as_of="2100-01-01")
                                   .warm_start(QUESTION, k=3)]
    assert WITHDRAWN["doc_id"] in [h.doc_id for h in Retriever.open(settings, dora, as_of="2000-06-01")
                                   .warm_start(QUESTION, k=3)]


def test_each_principal_is_served_by_its_route(two_tenants, who):
    settings, _ = two_tenants
    r = Retriever.open(settings, resolve_principal(settings, who))
    assert r.route == ROUTES[who] and r.generation == {"alice": "g0001", "carol": "g0002"}[who]


def test_no_channel_or_tool_of_tenant_a_sees_them(two_tenants, who):
    settings, _ = two_tenants
    r = Retriever.open(settings, resolve_principal(settings, who))
    found = [*r.warm_start(QUESTION, k=50, date="1887-03-02"), *r.bm25_docs(QUESTION, 50),
             *r.dense_docs(QUESTION, 50), *r.temporal_docs("1887-03-02", 50),
             *r.bm25_chunks(QUESTION, 50), *r.dense_chunks(QUESTION, 50),
             *r.date_range_chunks("1887-03-01", "1887-03-03", 50, query=QUESTION),
             *(hit for m in MARKERS for hit in r.substring_chunks(m, 50)),
             *r.substring_chunks("Comité secret", 50), *r.substring_chunks("Note réservée", 50),
             *r.substring_chunks("Pièce retirée", 50)]
    assert found and not any(h.doc_id in HIDDEN for h in found)
    # fetched by id, a hidden chunk answers like one that does not exist
    doc_of = dict(zip(r.view.chunk_ids.to_pylist(), r.view.doc_ids[r.view.doc_codes]))
    hidden = [c for c, d in doc_of.items() if d in HIDDEN]
    assert len(hidden) >= len(HIDDEN)
    for chunk_id in hidden:
        with pytest.raises(KeyError, match="no chunk .* visible to"):
            r.chunk(chunk_id)


def test_prompts_package_record_and_logs_stay_inside_the_allowed_set(two_tenants, who, caplog):
    settings, _ = two_tenants
    layout = StoreLayout.from_settings(settings)
    alice = resolve_principal(settings, who)
    provider = RecordingProvider(make_provider(LlmSettings(provider="rules")))
    with caplog.at_level(logging.DEBUG):
        package = answer_question(Retriever.open(settings, alice), QUESTION, provider, settings.query,
                                  layout=layout, principal=alice.model_dump())
    assert package.documents and provider.requests
    assert not _leaks([d.model_dump() for d in package.documents])
    assert not _leaks(provider.requests)
    assert not _leaks(json.loads(Path(package.record).read_text("utf-8")))
    assert not any(_leaks(r.getMessage()) for r in caplog.records)
    assert package.route == ROUTES[who]
    assert json.loads(Path(package.record).read_text("utf-8"))["route"] == ROUTES[who]


def test_ask_flow_artifacts_and_files_written_stay_inside_the_allowed_set(two_tenants, who):
    settings, before = two_tenants
    home = settings.home
    package = ask(AskParams(question=QUESTION, principal=who, provider="rules"), settings=settings)
    assert package.documents and not _leaks(package.model_dump()) and package.route == ROUTES[who]
    from prefect.client.orchestration import get_client

    from prefect.client.schemas.sorting import ArtifactSort

    # the newest first: in a whole test session the server holds far more than one page of them
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(sort=ArtifactSort.CREATED_DESC, limit=50)
    ours = [a for a in artifacts if a.key == "ask-evidence"]
    assert ours and not any(_leaks(a.data) for a in artifacts)
    # nothing written by the question (records, caches) mentions it; the generation's own
    # index files (LanceDB, lineage, the per-generation BM25 index) hold every tenant by design
    written = [p for p, stamp in files_of(home).items() if before.get(p) != stamp
               and not {"lance", "lineage", "indexes"} & set(p.relative_to(home).parts)]
    assert written and not any(m.encode() in p.read_bytes() for p in written for m in MARKERS)


def test_an_unknown_principal_is_refused(two_tenants):
    settings, _ = two_tenants
    with pytest.raises(AccessDenied):
        resolve_principal(settings, "mallory")
