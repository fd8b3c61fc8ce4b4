"""What a person types as a Gallica reference, and how long a Retry-After says to wait."""
from __future__ import annotations

from datetime import date, datetime, timezone

import pytest
from pydantic import ValidationError

from schemas.harvest import HarvestRequest, is_gallica_reference
from tasks.harvest.client import retry_after_seconds


@pytest.mark.parametrize("text, expected", [
    ("ark:/12148/bpt6k4616238h", "issue ark:/12148/bpt6k4616238h"),
    ("https://gallica.bnf.fr/ark:/12148/bpt6k4616238h", "issue ark:/12148/bpt6k4616238h"),
    ("ark:/12148/cb32779904b/date1887", "title ark:/12148/cb32779904b, issues 1887-01-01 → 1887-12-31"),
    ("ark:/12148/cb32779904b/date188702", "title ark:/12148/cb32779904b, issues 1887-02-01 → 1887-02-28"),
    ("https://gallica.bnf.fr/ark:/12148/cb32779904b/date18870115",
     "title ark:/12148/cb32779904b, issues 1887-01-15 → 1887-01-15"),
    ('sru:dc.title all "Le Gaulois"', "SRU query 'dc.title all \"Le Gaulois\"'"),
])
def test_references_name_an_issue_a_title_range_or_a_search(text, expected):
    assert is_gallica_reference(text)
    assert HarvestRequest.from_reference(text).describe() == expected


def test_a_title_without_dates_or_with_an_empty_range_is_refused_with_what_to_give():
    with pytest.raises(ValidationError, match="give the issue dates"):
        HarvestRequest.from_reference("ark:/12148/cb32779904b")
    with pytest.raises(ValidationError, match="is empty"):
        HarvestRequest.from_reference("ark:/12148/cb32779904b", date(1887, 2, 1), date(1887, 1, 1))
    assert not is_gallica_reference("scans/ark.txt") and not is_gallica_reference("s3://bucket/ark:/x")


def test_retry_after_is_read_as_seconds_or_as_an_http_date():
    now = datetime(2026, 12, 6, 1, 0, 0, tzinfo=timezone.utc)
    assert retry_after_seconds("120", now) == 120
    assert retry_after_seconds("Sun, 06 Dec 2026 01:00:30 GMT", now) == 30
    assert retry_after_seconds("Sun, 06 Dec 2026 00:59:00 GMT", now) == 0  # already past
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None


def test_a_date_range_goes_with_a_title_only():
    with pytest.raises(ValidationError, match="goes with a title ARK"):
        HarvestRequest.from_reference("ark:/12148/bpt6k4616238h", date(1915, 1, 1), date(1915, 12, 31))
    with pytest.raises(ValidationError, match="goes with a title ARK"):
        HarvestRequest.from_reference('sru:dc.title all "x"', date(1915, 1, 1), date(1915, 12, 31))
    pasted = "https://gallica.bnf.fr/ark:/12148/bpt6k4616238h/f1.item?rk=21459;2"  # from the viewer
    assert HarvestRequest.from_reference(pasted).ark == "ark:/12148/bpt6k4616238h"
