"""The query index lists records from memory: each file is read once, a new or rewritten record is
seen at the next listing, and nothing is read again while the folder is unchanged."""
from __future__ import annotations

import os

import pytest

from schemas.query import QueryRecord
from tasks.store import query_records
from tasks.store.layout import StoreLayout
from tasks.store.query_records import QueryIndex


def record(query_id: str, principal: str = "alice", question: str = "Où sont les greniers ?") -> QueryRecord:
    from schemas.query import Cost, LoopParams, Question
    from schemas.retrieval import Principal

    return QueryRecord(query_id=query_id, created_at="2026-12-05T21:00:00+00:00",
                       question=Question(question=question, question_id=query_id),
                       principal=Principal(principal_id=principal, tenant="default", groups=["public"]),
                       generation="g0001", space_id="s", provider="rules", model=None,
                       params=LoopParams(), plan_calls=[], sub_questions=[], warm_starts=[], steps=[],
                       calls=[], briefings=[], final=[], flags=[], cost=Cost())


def write(layout: StoreLayout, rec: QueryRecord) -> None:
    from tasks.query.record import write_record

    write_record(layout, rec)


@pytest.fixture
def layout(tmp_path) -> StoreLayout:
    return StoreLayout(tmp_path / "warehouse", tmp_path / "manifests")


def test_each_record_is_read_once_and_changes_are_seen(layout, monkeypatch):
    index = QueryIndex(layout)
    assert index.listings() == []
    for n in range(3):
        write(layout, record(f"20261205T21000{n}-aaaaaaaa-{n:016x}"))
    reads = []
    real = query_records.read_query_record
    monkeypatch.setattr(query_records, "read_query_record", lambda *a: reads.append(a[1]) or real(*a))
    index.FRESH_NS = 0  # the folder's clock tick is trusted here; see QueryIndex
    first = index.listings()
    assert [q.query_id for q in first] == sorted((q.query_id for q in first), reverse=True)
    assert len(first) == 3 and len(reads) == 3 and first[0].question == "Où sont les greniers ?"
    assert index.listings() == first and len(reads) == 3  # unchanged: nothing read
    # a new record and a rewritten one (a redaction): only those two are read
    write(layout, record("20261205T210009-bbbbbbbb-0000000000000009", principal="bob"))
    write(layout, record(first[-1].query_id, question="[redacted]"))
    stamp = layout.queries.stat().st_mtime_ns
    os.utime(layout.queries, ns=(stamp + 10_000_000, stamp + 10_000_000))  # a later tick, surely
    again = index.listings()
    assert len(again) == 4 and len(reads) == 5
    assert again[0].principal_id == "bob" and again[-1].question == "[redacted]"
    # a file that is not a record is not listed
    (layout.queries / "20261205T210010-cccccccc-0000000000000010.json").write_text("{nope")
    os.utime(layout.queries, ns=(stamp + 20_000_000, stamp + 20_000_000))
    assert len(index.listings()) == 4
