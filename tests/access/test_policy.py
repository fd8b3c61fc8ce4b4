"""The access policy: one decision per access class, and the mask over a table, the mask over a
generation view and the Lance filter derived from it selecting the same rows."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from schemas.retrieval import AccessDenied, Principal
from tasks.access.policy import AccessClass, AccessPolicy, AllowedSet, access_of


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
    assert AccessPolicy(P).mask(t).tolist() == [True, False, False, True]


def test_missing_or_empty_policy_metadata_fails_closed():
    t = table([None, "t1", "t1", ""], [["public"], None, [], ["public"]])
    assert not AccessPolicy(P).mask(t).any()


def test_excluded_documents_are_masked_out():
    t = table(["t1"] * 3, [["public"]] * 3, docs=["a", "b", "a"])
    assert AccessPolicy(P, excluded_doc_ids={"a"}).mask(t).tolist() == [False, True, False]


@pytest.mark.parametrize("bad", [
    Principal(principal_id="p", tenant="", groups=["public"]),
    Principal(principal_id="p", tenant="t1", groups=[]),
    Principal(principal_id="p", tenant="t1", groups=["x' OR '1'='1"]),
])
def test_principals_that_cannot_be_expressed_safely_are_refused(bad):
    with pytest.raises(AccessDenied):  # no mask, no filter, no decision for it
        AccessPolicy(bad)
    with pytest.raises(AccessDenied):
        AllowedSet.of_table(table(["t1"], [["public"]]), bad)


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
            where = AccessPolicy(P, excluded).where
            got = set(lt.search(np.array([1.0, 1.0], np.float32)).where(where, prefilter=True)
                      .limit(100).to_arrow().column("chunk_id").to_pylist())
            mask = AccessPolicy(P, excluded).mask(t)
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


def test_a_class_is_admitted_on_tenant_and_one_shared_group_only():
    policy = AccessPolicy(P)
    assert policy.admits(AccessClass("t1", ("staff",)))
    assert not policy.admits(AccessClass("t2", ("public",)))
    assert not policy.admits(AccessClass("t1", ()))
    assert not policy.admits(AccessClass(None, ("public",)))
    assert not policy.admits(AccessClass("", ("public",)))
    assert AccessClass.of("t1", ["public", None]) == AccessClass("t1", ("public",))


def test_no_group_or_tenant_name_can_merge_two_access_classes():
    """Classes are keyed by dictionary codes, not by joined names: ["a,b"] is not ["a", "b"],
    and a separator inside a name does not shift a group into the tenant."""
    t = table(["t1", "t1", "t1|0", "t1", "t1"],
              [["a,b"], ["a", "b"], ["x"], ["a\x1fb"], ["b", "a"]])
    codes, classes = access_of(t)
    assert [classes[c] for c in codes] == [
        AccessClass("t1", ("a,b",)), AccessClass("t1", ("a", "b")), AccessClass("t1|0", ("x",)),
        AccessClass("t1", ("a\x1fb",)), AccessClass("t1", ("b", "a"))]
    assert AccessPolicy(Principal(principal_id="p", tenant="t1", groups=["a"])).mask(t).tolist() == \
        [False, True, False, False, True]


TENANTS = st.sampled_from(["t1", "t2", "", None, "t1|0"])
GROUP_NAMES = st.sampled_from(["public", "staff", "x", "a", "b", "a,b", "", None])
ROWS = st.lists(st.tuples(TENANTS, st.one_of(st.none(), st.lists(GROUP_NAMES, max_size=3)),
                          st.sampled_from(["d0", "d1", "d2", "d3"])), min_size=1, max_size=12)
PRINCIPALS = st.builds(lambda tenant, groups: Principal(principal_id="p", tenant=tenant, groups=groups),
                       st.sampled_from(["t1", "t2"]),
                       st.lists(st.sampled_from(["public", "staff", "x", "a", "b"]), min_size=1,
                                max_size=3, unique=True))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=ROWS, principal=PRINCIPALS, excluded=st.sets(st.sampled_from(["d0", "d1", "d2", "d3"]), max_size=2))
def test_the_decision_the_table_mask_the_view_mask_and_the_filter_agree(tmp_path_factory, rows, principal,
                                                                        excluded):
    """Random rows (missing, empty, odd or null tenants and groups) and principals: every form
    of the policy selects exactly the rows whose class the policy admits."""
    import lancedb

    from tasks.query.view import GenerationView

    t = table([r[0] for r in rows], [r[1] for r in rows], docs=[r[2] for r in rows])
    n = t.num_rows
    t = (t.append_column("corpus", pa.array(["c"] * n)).append_column("date", pa.array(["2020-01-01"] * n))
         .append_column("ordinal", pa.array(list(range(n)), pa.int32()))
         .append_column("vector", pa.array([[float(i), 1.0] for i in range(n)], pa.list_(pa.float32(), 2))))
    policy = AccessPolicy(principal, excluded)
    decided = [policy.admits(AccessClass.of(tenant, groups)) and doc not in excluded
               for tenant, groups, doc in rows]
    assert policy.mask(t).tolist() == decided
    assert policy.allowed_set(GenerationView.from_table(t)).mask.tolist() == decided
    lt = lancedb.connect(str(tmp_path_factory.mktemp("lance"))).create_table("c", t)
    got = set(lt.search(np.array([1.0, 1.0], np.float32)).where(policy.where, prefilter=True)
              .limit(100).to_arrow().column("chunk_id").to_pylist())
    assert got == {f"c{i}" for i, ok in enumerate(decided) if ok}
