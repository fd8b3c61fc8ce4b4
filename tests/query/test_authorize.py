from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from schemas.retrieval import AccessDenied, Principal
from tasks.query.authorize import AllowedSet, allowed_mask, allowed_where


def table(tenants, groups, docs=None):
    n = len(tenants)
    return pa.table({
        "chunk_id": [f"c{i}" for i in range(n)],
        "doc_id": docs or [f"d{i}" for i in range(n)],
        "tenant": pa.array(tenants, pa.string()),
        "groups": pa.array(groups, pa.list_(pa.string())),
    })


P = Principal(principal_id="p", tenant="t1", groups=["public", "staff"])


def test_mask_requires_tenant_and_a_shared_group():
    t = table(["t1", "t1", "t2", "t1"], [["public"], ["secret"], ["public"], ["x", "staff"]])
    assert allowed_mask(t, P).tolist() == [True, False, False, True]


def test_missing_or_empty_policy_metadata_fails_closed():
    t = table([None, "t1", "t1", ""], [["public"], None, [], ["public"]])
    assert not allowed_mask(t, P).any()


def test_excluded_documents_are_masked_out():
    t = table(["t1"] * 3, [["public"]] * 3, docs=["a", "b", "a"])
    assert allowed_mask(t, P, excluded_doc_ids={"a"}).tolist() == [False, True, False]


@pytest.mark.parametrize("bad", [
    Principal(principal_id="p", tenant="", groups=["public"]),
    Principal(principal_id="p", tenant="t1", groups=[]),
    Principal(principal_id="p", tenant="t1", groups=["x' OR '1'='1"]),
])
def test_principals_that_cannot_be_expressed_safely_are_refused(bad):
    with pytest.raises(AccessDenied):
        allowed_where(bad)
    with pytest.raises(AccessDenied):
        allowed_mask(table(["t1"], [["public"]]), bad)


def test_where_clause_and_mask_select_the_same_rows(tmp_path):
    import lancedb

    from tasks.index.dense_build import _scalar_indexes

    t = table(["t1", "t1", "t2", None, "t1", "t1", "t1", "t1"],
              [["public"], ["secret"], ["public"], ["public"], [], ["staff", "z"], None, [None]],
              docs=["a", "b", "c", "d", "e", "f", "g", "h"])
    t = t.append_column("vector", pa.array([[float(i), 1.0] for i in range(8)],
                                           pa.list_(pa.float32(), 2)))
    for column in ("corpus", "date"):  # the scalar indexes publish builds need them
        t = t.append_column(column, pa.array(["c"] * 8))
    lt = lancedb.connect(str(tmp_path)).create_table("c", t)
    # as published (the filter is answered from the scalar indexes) and as a plain scan
    for indexed in (False, True):
        if indexed:
            _scalar_indexes(lt)
        for excluded in (set(), {"f"}):
            where = allowed_where(P, excluded)
            got = set(lt.search(np.array([1.0, 1.0], np.float32)).where(where, prefilter=True)
                      .limit(100).to_arrow().column("chunk_id").to_pylist())
            mask = allowed_mask(t, P, excluded)
            assert got == {c for c, m in zip(t.column("chunk_id").to_pylist(), mask) if m} == \
                ({"c0", "c5"} - ({"c5"} if excluded else set()))



def test_the_allowed_set_joins_policy_tombstones_and_time_in_both_forms(tmp_path):
    """Every policy cell with a validity interval present: mask and LanceDB filter agree."""
    from datetime import datetime, timezone

    import lancedb

    utc = timezone.utc
    ts = pa.timestamp("us", tz="UTC")
    t = table(["t1", "t1", "t2", "t1", "t1", "t1"],
              [["public"], ["public"], ["public"], ["secret"], ["staff"], ["public"]],
              docs=["a", "b", "c", "d", "e", "f"])
    t = t.append_column("valid_from", pa.array([None, datetime(2030, 1, 1, tzinfo=utc), None, None,
                                                 datetime(2001, 1, 1, tzinfo=utc), None], ts))
    t = t.append_column("valid_to", pa.array([None, None, None, None, datetime(2020, 1, 1, tzinfo=utc),
                                               datetime(2025, 1, 1, tzinfo=utc)], ts))
    t = t.append_column("vector", pa.array([[float(i), 1.0] for i in range(6)], pa.list_(pa.float32(), 2)))
    lt = lancedb.connect(str(tmp_path)).create_table("c", t)
    expected = {2010: {"c0", "c4", "c5"}, 2026: {"c0"}, 2031: {"c0", "c1"}}
    for year, rows in expected.items():
        allowed = AllowedSet.of_table(t, P, {"f"} if year == 2031 else (), as_of=datetime(year, 6, 1, tzinfo=utc))
        got = set(lt.search(np.array([1.0, 1.0], np.float32)).where(allowed.where, prefilter=True)
                  .limit(100).to_arrow().column("chunk_id").to_pylist())
        mask = {c for c, m in zip(t.column("chunk_id").to_pylist(), allowed.mask) if m}
        assert got == mask == rows, year
