"""What the UI shows, rendered without a server: evidence a person reads, failures in words,
run logs without server paths, and the forms built from the state."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from flows.artifacts.evidence import evidence_markdown, lineage_markdown, marked_passage
from flows.artifacts.failures import INTERNAL, failure_words
from flows.artifacts.links import document_link
from flows.run_logging import redact
from schemas.query import Cost, EvidenceDocument, EvidencePackage, EvidenceSpan, StageRanks
from schemas.settings import MabillonSettings, ReadingRoomSettings

QUESTION = "Quand le débat sur les blés a-t-il été renvoyé à jeudi ?"


def package() -> EvidencePackage:
    span = EvidenceSpan(chunk_id="r1-c0", page=1, bbox=[1, 2, 3, 4], char_start=0, char_end=90,
                        text="Séance terne. On attendait un grand débat sur les blés; il a été "
                             "renvoyé à jeudi. <script>x</script> *gras* | pipe")
    doc = EvidenceDocument(doc_id="gaulois-1887-03-03", rank=1, corpus="le_gaulois", date="1887-03-03",
                           revision="r1", digest="ab" * 32, source_id="gaulois-1887-03-03",
                           status="accepted", confirmations=2, rationales=["le renvoi à jeudi"],
                           ranks=StageRanks(bm25=1, dense=2, fused=1), evidence=[span])
    return EvidencePackage(question=QUESTION, generation="g0002", space_id="s1", provider="rules",
                           documents=[doc], accepted=[doc.doc_id], held=[], rejected=[], rejected_docs=[],
                           retrieved=[doc.doc_id], plan=[], briefings=[], flags=[], cost=Cost(total_s=0.4))


def test_the_passage_marks_the_question_words_and_escapes_markup():
    text = marked_passage(package().documents[0].evidence[0].text, QUESTION)
    assert "**débat**" in text and "**blés**" in text and "**renvoyé**" in text and "**jeudi**" in text
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert r"\*gras\*" in text and r"\|" in text


def test_a_long_passage_is_cut_around_the_matches():
    text = "Préambule sans rapport. " * 40 + "Le débat sur les blés est renvoyé à jeudi." + " Suite." * 40
    out = marked_passage(text, QUESTION, chars=200)
    assert out.startswith("… ") and out.endswith(" …") and "**blés**" in out and len(out) < 300


def test_the_evidence_reads_as_titles_passages_and_links_then_one_table():
    links = {"gaulois-1887-03-03": ("lineage", "http://ui/artifacts/artifact/1")}
    md = evidence_markdown(package(), {"gaulois-1887-03-03": "La Chambre, 3 mars"}, links)
    assert "### 1. ✓ La Chambre, 3 mars" in md
    assert "*le\\_gaulois · 1887-03-03 · accepted, confirmed by 2 sub-questions · p. 1*" in md
    assert "> " in md and "[lineage](http://ui/artifacts/artifact/1)" in md
    table = md.split("## Ranks and ids")[1].splitlines()
    assert table[2].count("|") == 9 and "`gaulois-1887-03-03`" in table[4]
    assert "sha256 `" + "ab" * 32 + "`" in lineage_markdown(package(), {})


def test_the_evidence_links_to_its_page_in_the_reading_room_where_one_runs():
    from flows.artifacts.links import answer_links

    p = package().model_copy(update={"query_id": "20260101T000000-abcdef12-123456"})
    plain = MabillonSettings(home=Path("/nowhere"))
    assert document_link(plain, p, p.documents[0], "http://ui/x") == ("lineage", "http://ui/x")
    room = plain.model_copy(update={"reading_room": ReadingRoomSettings(url="https://lecture.example/")})
    page = "https://lecture.example/queries/20260101T000000-abcdef12-123456"
    links = {d.doc_id: document_link(room, p, d, "http://ui/x") for d in p.documents}
    md = evidence_markdown(p, {}, links, answer_links(room, p))
    assert f"[evidence in the reading room]({page}#doc-1)" in md
    assert f"[evidence of this answer in the reading room]({page})" in md.split("### 1.")[0]


def test_failures_are_words_without_paths_or_principals():
    from schemas.retrieval import AccessDenied
    from tasks.store.serving import NoServingGeneration

    words = failure_words(AccessDenied("unknown principal 'bea'; add it to /srv/home/principals.json"))
    assert "bea" not in words and "/srv" not in words and words.startswith("Access refused")
    words = failure_words(NoServingGeneration("no generation serves under /srv/home/manifests"))
    assert "/srv" not in words and "ingest" in words
    assert failure_words(RuntimeError("boom at /srv/x.py")) == INTERNAL


def test_run_logs_sent_to_the_ui_lose_tracebacks_and_paths():
    from flows.run_logging import RedactedAPILogHandler

    handler = RedactedAPILogHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    try:
        raise FileNotFoundError("/srv/mabillon/home/manifests/routing.json")
    except FileNotFoundError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed: %s", ("/srv/a/b.py",), sys.exc_info())
    text = handler.format(record)
    assert text == "failed: <server path> (details in the serve log)"
    assert record.exc_info is not None  # the serve log's own handlers still get the traceback
    assert redact("see http://127.0.0.1:4200/api/x and s3://bucket/a/b") == \
        "see http://127.0.0.1:4200/api/x and s3://bucket/a/b"


@pytest.fixture(scope="module")
def two_generations(tmp_path_factory) -> MabillonSettings:
    from flows.release import release
    from tests.conftest import SAMPLE_RECORDS, write_records

    root = tmp_path_factory.mktemp("forms")
    settings = MabillonSettings(home=root / "home")
    release(paths=[str(write_records(root / "a.jsonl", SAMPLE_RECORDS[:2]))], settings=settings)
    release(paths=[str(write_records(root / "b.jsonl", SAMPLE_RECORDS[2:]))], settings=settings)
    return settings


def test_forms_offer_the_generations_and_say_what_serves(two_generations):
    from flows.serve import build_deployments

    forms = {d.name: d for d in build_deployments(two_generations)}
    ask = forms["ask"]._parameter_openapi_schema.definitions["AskParams"]["properties"]
    assert list(ask)[:4] == ["question", "access_token", "generation", "provider"]
    assert ask["generation"]["enum"] == ["serving", "g0002", "g0001"]
    assert not any("anyOf" in p for name, p in ask.items() if name != "budgets")  # no None switches
    assert "anyOf" in ask["budgets"]  # folded until opened
    promote = forms["promote"]._parameter_openapi_schema.definitions["PromoteParams"]
    assert promote["properties"]["generation"]["enum"] == ["g0001"]  # not what serves already
    assert "now g0002 serves since" in promote["properties"]["generation"]["description"]
    assert {"operator", "operator_token", "reason"} <= set(promote["required"])
    rollback = forms["rollback"]._parameter_openapi_schema.definitions["RollbackParams"]["properties"]
    assert rollback["to"]["enum"] == ["g0001"] and "return to g0001" in rollback["to"]["description"]
    assert "Now g0002 serves" in forms["promote"].description
