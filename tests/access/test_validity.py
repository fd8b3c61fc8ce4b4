"""The time rule: validity intervals parsed from ISO 8601, masks at a query time, as_of."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pytest

from schemas.retrieval import AccessDenied, Principal
from schemas.validity import InvalidInstant, is_valid_at, parse_instant, parse_interval
from tasks.access.validity import InvalidAsOf, ValidityWindow, resolve_as_of, validity_where

UTC = timezone.utc
READER = Principal(principal_id="r", tenant="t", groups=["public"])
OPERATOR = Principal(principal_id="o", tenant="t", groups=["public"], roles=["operator"])


@pytest.mark.parametrize("text, expected", [
    ("2027-01-01", datetime(2027, 1, 1, tzinfo=UTC)),
    ("2027-01-01T09:00:00+01:00", datetime(2027, 1, 1, 8, tzinfo=UTC)),
    ("2027-01-01T08:00Z", datetime(2027, 1, 1, 8, tzinfo=UTC)),
    ("2027-01-01 08:00:00", datetime(2027, 1, 1, 8, tzinfo=UTC)),  # no offset: UTC
])
def test_iso_dates_and_times_become_utc_instants(text, expected):
    assert parse_instant(text) == expected


@pytest.mark.parametrize("text", ["demain", "01/02/2027", "2027-02-30", "2027-01-01T25:00", "", 20270101])
def test_anything_else_is_refused_with_the_expected_form(text):
    with pytest.raises(InvalidInstant, match="2027-01-01"):
        parse_instant(text, "valid_from")


def test_an_interval_that_never_opens_is_refused_and_absent_bounds_are_open():
    with pytest.raises(InvalidInstant, match="never be visible"):
        parse_interval("2027-01-02", "2027-01-01")
    assert parse_interval(None, "") == (None, None)
    assert is_valid_at(datetime(1, 1, 1, tzinfo=UTC), None, None)


def _table(bounds):
    ts = pa.timestamp("us", tz="UTC")
    return pa.table({"valid_from": pa.array([b[0] for b in bounds], ts),
                     "valid_to": pa.array([b[1] for b in bounds], ts)})


def at(y, m=1, d=1):
    return datetime(y, m, d, tzinfo=UTC)


BOUNDS = [(None, None), (at(2030), None), (None, at(2020)), (at(2010), at(2040))]


@pytest.mark.parametrize("when, visible", [
    (at(2005), [True, False, True, False]),
    (at(2010), [True, False, True, True]),  # from is inclusive
    (at(2020), [True, False, False, True]),  # to is exclusive
    (at(2030), [True, True, False, True]),
    (at(2040), [True, True, False, False]),
])
def test_a_row_is_valid_from_its_start_until_before_its_end(when, visible):
    assert ValidityWindow.of(_table(BOUNDS)).mask_at(when).tolist() == visible


def test_the_mask_is_reused_inside_a_span_and_recomputed_past_a_bound():
    window = ValidityWindow.of(_table(BOUNDS))
    first = window.mask_at(at(2021))
    assert window.mask_at(at(2029, 12, 31)) is first  # no bound between: same mask
    after = window.mask_at(at(2030))
    assert after is not first and after[1] and not first[1]


def test_a_table_without_bounds_or_columns_is_always_valid():
    assert ValidityWindow.of(_table([(None, None)] * 3)).mask_at(at(2000)) is None
    assert ValidityWindow.of(pa.table({"x": [1, 2]})).mask_at(at(2000)) is None


def test_the_lance_filter_selects_the_rows_the_mask_does(tmp_path):
    import lancedb

    t = _table(BOUNDS).append_column("chunk_id", pa.array([f"c{i}" for i in range(4)]))
    t = t.append_column("vector", pa.array([[float(i), 1.0] for i in range(4)], pa.list_(pa.float32(), 2)))
    lt = lancedb.connect(str(tmp_path)).create_table("c", t)
    window = ValidityWindow.of(t)
    for when in (at(2005), at(2010), at(2020), at(2030, 6), at(2040)):
        got = set(lt.search(np.array([1.0, 1.0], np.float32)).where(validity_where(when), prefilter=True)
                  .limit(10).to_arrow()["chunk_id"].to_pylist())
        assert got == {f"c{i}" for i, ok in enumerate(window.mask_at(when)) if ok}, when


def test_as_of_is_parsed_or_refused_and_the_future_is_for_operators():
    now = at(2026, 6)
    assert resolve_as_of(None, READER, now) is None
    assert resolve_as_of("2020-01-01", READER, now) == at(2020)
    with pytest.raises(InvalidAsOf, match="ISO 8601"):
        resolve_as_of("last tuesday", READER, now)
    with pytest.raises(AccessDenied, match="embargo"):
        resolve_as_of("2027-01-01", READER, now)
    assert resolve_as_of("2027-01-01", OPERATOR, now) == at(2027)
    assert resolve_as_of(now - timedelta(seconds=1), READER, now) == now - timedelta(seconds=1)
