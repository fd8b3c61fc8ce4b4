"""Every artifact the UI shows, built from hostile ids, titles and reasons (backticks, pipes,
`[x](javascript:…)`, line breaks, HTML, terminal escapes), reads as inert text: no live link
outside http(s), no raw HTML, its tables keep their rows. Operator artifacts name only documents
anyone may see, and count the others per tenant."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from flows.artifacts.evidence import evidence_markdown, lineage_markdown
from flows.artifacts.failures import failure_markdown
from flows.artifacts.generations import diff_lines, diff_markdown
from flows.ask import batch_markdown
from flows.drop_folder import UriListEntries, summary_markdown
from flows.operate import DeletionResult, deletion_markdown, routing_markdown
from schemas.generation import (Counts, IngestResult, Quarantined, ReconcileReport, RoutingEvent,
                                RoutingRecord, RunCounts, SourceDiff)
from schemas.query import Cost, EvidenceDocument, EvidencePackage, EvidenceSpan, StageRanks
from schemas.release import Decision, Freshness, ReleaseRecord, ShadowByType, ShadowReport
from schemas.retrieval import Principal
from tasks.ingest.publish import summary_markdown as generation_summary
from tasks.ops.diff import GenerationDiff
from tasks.ops.disclosure import disclosure_of
from tasks.ops.gate_decision import GateReport, gate_markdown
from tasks.ops.release_record import release_record_markdown
from tests.markdown_inert import assert_inert

EVIL_ID = "x`|y` [x](javascript:alert(1)) <img src=x onerror=alert(1)>\n| \x1b[2J"
EVIL_TITLE = "<script>alert(1)</script> ![i](data:text/html,x) `code` | pipe\n# heading <javascript:alert(1)>"
EVIL_TEXT = "Le débat [lien](javascript:alert(1)) <b>gras</b> | cellule\n\n| a | b |"
NOW = datetime(2026, 12, 5, 12, tzinfo=timezone.utc)


def doc(doc_id: str, rank: int) -> EvidenceDocument:
    span = EvidenceSpan(chunk_id=f"{doc_id}-c0`|", page=1, bbox=[1, 2, 3, 4], char_start=0, char_end=9,
                        text=EVIL_TEXT)
    return EvidenceDocument(doc_id=doc_id, rank=rank, corpus="press | `x`", date="1887-03-03", revision="r1",
                            digest="ab" * 32, source_id=doc_id, status="accepted", confirmations=1,
                            rationales=[EVIL_TEXT], ranks=StageRanks(bm25=1, dense=2, fused=rank),
                            evidence=[span])


def package() -> EvidencePackage:
    docs = [doc(EVIL_ID, 1), doc("jo-1887-03-02", 2), doc("`", 3)]
    return EvidencePackage(question="Qui a parlé des blés ? [x](javascript:alert(1))", generation="g0002",
                           space_id="s1", provider="rules", documents=docs, accepted=[d.doc_id for d in docs],
                           held=[], rejected=[], rejected_docs=[], retrieved=[d.doc_id for d in docs], plan=[],
                           briefings=[], flags=[], cost=Cost(total_s=0.4), question_id="q|1")


def test_the_evidence_and_its_lineage_stay_text_and_the_ranks_table_keeps_one_row_per_document():
    p = package()
    links = {EVIL_ID: ("lineage", "javascript:alert(1)"), "jo-1887-03-02": ("lineage", "http://ui/a/1")}
    md = evidence_markdown(p, {EVIL_ID: EVIL_TITLE}, links, [("evidence", "data:text/html,x")])
    reading = assert_inert(md, rows=[3])
    assert reading.links == ["http://ui/a/1"]  # the safe one is still a link
    assert "javascript:alert(1)" in reading.text and "<script>alert(1)</script>" in reading.text
    assert "\x1b" not in md and "\\x1b[2J" in reading.text  # the escape is shown, not sent
    assert_inert(lineage_markdown(p, {EVIL_ID: EVIL_TITLE}))
    assert_inert(batch_markdown([p, p], {"n": 2, "provider": "rules`", "framework_s_mean": 0.1,
                                         "model_s_mean": 0.2, "output": "/tmp/a`b|c.jsonl"}), rows=[2])


def record() -> ReleaseRecord:
    shadow = ShadowReport(staged="g0002", serving="g0001", system="trace|x", k=5, n=2, recall_staged=1.0,
                          recall_serving=0.5, mean_overlap=0.5, latency_staged_median_s=0.1,
                          latency_serving_median_s=0.1, latency_staged_p95_s=0.2, latency_serving_p95_s=0.2,
                          rows=[], by_type=[ShadowByType(question_type="lookup | [x](javascript:y)", n=2,
                                                         recall_staged=1.0, recall_serving=0.5, mean_overlap=0.5)],
                          questions="/q/`x`.jsonl")
    decision = Decision(action="approve", actor="ana <img src=x onerror=alert(1)>", authenticated=False,
                        at=NOW, reason="ok [x](javascript:alert(1))\n# pwned", via="gate",
                        canary_groups=["g|1"])
    return ReleaseRecord(generation="g0002", recorded_at=NOW, manifest="/m/g0002.yaml", manifest_sha256="c" * 64,
                         parent="g0001", counts=Counts(sources=3), run=RunCounts(), digest="d" * 64,
                         diff={"added": 1}, validation={"success": True, "expectations": 9, "report": "/r`x"},
                         quarantined=[Quarantined(uri=f"file:///in/{EVIL_ID}", reason=EVIL_TEXT)],
                         shadow=shadow, decision=decision, serving_before="g0001", serving_after="g0002",
                         rollback_target="g0001",
                         freshness=Freshness(newest_source=f"file:///in/{EVIL_ID}", newest_arrival_at=NOW,
                                             answerable_at=NOW + timedelta(seconds=3), seconds=3.0))


def test_release_records_and_the_gate_form_stay_text_and_name_no_quarantined_input():
    r = record()
    for md in (release_record_markdown(r, "/home/releases/`g0002`.yaml"),
               gate_markdown(GateReport(generation="g0002", serving="g0001", counts=r.counts, diff=r.diff,
                                        quarantined=r.quarantined, validation=r.validation, shadow=r.shadow),
                             refusal="not 'x`|y' [x](javascript:alert(1))")):
        reading = assert_inert(md, rows=[2])  # the shadow table: one question type, then all
        assert "x`|y`" not in reading.text and "/in/" not in md  # quarantined inputs are counted
        assert "Quarantined inputs (1)" in reading.text


def test_operator_artifacts_stay_text():
    routing = RoutingRecord(serving="g0002", history=[RoutingEvent(
        at=NOW, actor="ops [x](javascript:alert(1))", action="promote", from_generation="g0001",
        to_generation="g0002", reason="<script>x</script>\n| a |")])
    assert_inert(routing_markdown(routing))
    deleted = deletion_markdown(DeletionResult(doc_ids=[EVIL_ID, "b"], unknown=["b"], generation="g0003",
                                               masked_after_s=0.01, published_after_s=1.0, purged_after_s=None),
                                "ops `x`", "rights request [x](javascript:alert(1))")
    assert_inert(deleted)
    assert "x`|y`" not in deleted and "Deleted 2 document(s)" in deleted  # counted, not named
    result = IngestResult(generation="g0002", serving=True, counts=Counts(), run=RunCounts(),
                          quarantined=[Quarantined(uri=f"file:///drop/{EVIL_ID}", reason=EVIL_TEXT)],
                          manifest=None, published=True)
    summary = summary_markdown(UriListEntries(paths=["/drop/`x`|y"], skipped=[f"{EVIL_ID}: still being written"]),
                               result)
    assert_inert(summary)
    assert "x`|y` [x]" not in summary and "quarantined: 1 input(s)" in summary
    report = ReconcileReport(counts=Counts(sources=2), diff=SourceDiff(added=[EVIL_ID]), digest="e" * 64)
    assert_inert(generation_summary("g0002", report, RunCounts(), result.quarantined))
    assert_inert(failure_markdown("delete", f"no document {EVIL_ID!r}; nothing was deleted"))


def revisions(*rows: tuple) -> pa.Table:
    names = ["source_id", "doc_id", "tenant", "groups", "valid_from", "valid_to", "is_current"]
    return pa.Table.from_pylist([dict(zip(names, (r[0], r[0], *r[1:]))) for r in rows])


PUBLIC = Principal(principal_id="default", tenant="default", groups=["public"])


def test_the_diff_artifact_names_only_public_documents_and_counts_the_others_per_tenant():
    later = NOW + timedelta(days=30)
    a = disclosure_of(revisions(("gone-public", "default", ["public"], None, None, True),
                                ("gone-secret", "tenant-b", ["b"], None, None, True)), PUBLIC, NOW, set())
    b = disclosure_of(revisions(("new-public", "default", ["public"], None, None, True),
                                ("new-secret", "tenant-b", ["b"], None, None, True),
                                ("embargoed", "default", ["public"], later, None, True),
                                ("staff-only", "default", ["staff"], None, None, True),
                                ("deleted", "default", ["public"], None, None, True),
                                (EVIL_ID, "default", ["public"], None, None, True)), PUBLIC, NOW, {"deleted"})
    diff = GenerationDiff(a="g0001", b="g0002", sources=SourceDiff(
        added=sorted(["new-public", "new-secret", "embargoed", "staff-only", "deleted", EVIL_ID]),
        removed=["gone-public", "gone-secret"]), chunks={"g0001": 2, "g0002": 6}, vectors={"g0001": 2, "g0002": 6},
        model={"g0001": "m", "g0002": "m"}, space_id={"g0001": "s", "g0002": "s"},
        parsers={"g0001": {}, "g0002": {}}, segmenter={"g0001": "x", "g0002": "x"})
    md = diff_markdown(diff, a.then(b))
    reading = assert_inert(md)
    for hidden in ("new-secret", "gone-secret", "embargoed", "staff-only", "deleted"):
        assert hidden not in md, hidden
    assert "  + new-public" in reading.text and "  - gone-public" in reading.text
    assert "  + 3 not public (default)" in reading.text and "  + 1 not public (tenant-b)" in reading.text
    assert "  - 1 not public (tenant-b)" in reading.text
    assert "\x1b" not in md and "\\x1b[2J" in reading.text  # a public hostile id: named, inert
    # the operator's own CLI still lists every id
    assert "  + new-secret" in diff_lines(diff)
    nobody = disclosure_of(revisions(("new-public", "default", ["public"], None, None, True)), None, NOW, set())
    assert nobody.public == frozenset()


@pytest.mark.parametrize("words", ["```\n<script>x</script>", "a`b", "\x9b31m"])
def test_failure_words_stay_text(words):
    assert_inert(failure_markdown("ask", words))


@pytest.fixture(scope="module")
def two_generations(tmp_path_factory):
    """g0001: two public records; g0002 adds a public one, one of tenant B and one under embargo."""
    from flows.release import release
    from tests.conftest import SAMPLE_RECORDS, settings_for, write_records

    root = tmp_path_factory.mktemp("disclosure")
    settings = settings_for(root / "home")
    release(paths=[str(write_records(root / "a.jsonl", SAMPLE_RECORDS[:2]))], settings=settings)
    more = [SAMPLE_RECORDS[2], {**SAMPLE_RECORDS[3], "doc_id": "secret-b", "tenant": "tenant-b", "groups": ["b"]},
            {"doc_id": "sous-embargo", "corpus": "c", "text": "Pas encore.", "valid_from": "2999-01-01"}]
    release(paths=[str(write_records(root / "b.jsonl", more))], settings=settings)
    return settings


def test_the_published_diff_names_public_documents_only(two_generations):
    from flows.artifacts.generations import diff_disclosure, last_diff
    from tasks.access.principals import default_principal
    from tasks.store.layout import StoreLayout

    layout = StoreLayout.from_settings(two_generations)
    diff = last_diff(layout, "g0002")
    md = diff_markdown(diff, diff_disclosure(layout, diff, default_principal(two_generations)))
    assert "  + intransigeant-1887-03-04" in md and "secret-b" not in md and "sous-embargo" not in md
    assert "  + 1 not public (default)" in md and "  + 1 not public (tenant-b)" in md
    assert "secret-b" in "\n".join(diff_lines(diff))  # the operator's CLI names it
    assert "intransigeant" not in diff_markdown(diff, diff_disclosure(layout, diff, None))
