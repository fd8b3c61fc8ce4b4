"""Validity intervals: when a document may be shown (an embargo until a date, a withdrawal at one).

A chunk is valid at time t when `valid_from <= t < valid_to`; an absent bound is open, so a
chunk with neither is always valid (generations published before intervals existed keep
serving unchanged). Values are ISO 8601: a date (`2027-01-01`, the start of that day in UTC),
or a date and time with an offset (`2027-01-01T09:00:00+01:00`, `...Z`); a time without an
offset is read as UTC. Stored and compared as UTC instants.
"""
from __future__ import annotations

import re
from datetime import date, datetime, time, timezone

VALIDITY_FIELDS = ("valid_from", "valid_to")
# ASCII digits only (re.ASCII): `\d` alone also takes '٣' and other scripts' digits.
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$", re.ASCII)
# ISO 8601 as Python reads it, with a "T" or a space between date and time.
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?$",
                        re.ASCII)
EXAMPLES = "e.g. 2027-01-01, 2027-01-01T09:00:00+01:00 or 2027-01-01T08:00:00Z"


class InvalidInstant(ValueError):
    """A time that is not ISO 8601 (or not a calendar date)."""


def parse_instant(value: object, name: str = "time") -> datetime:
    """An ISO 8601 date or date-time as an aware UTC datetime; raises InvalidInstant saying why."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime.combine(value, time(0), timezone.utc)
    elif isinstance(value, str) and (_DATE_ONLY.match(value.strip()) or _DATE_TIME.match(value.strip())):
        text = value.strip()
        try:
            parsed = (datetime.combine(date.fromisoformat(text), time(0), timezone.utc)
                      if _DATE_ONLY.match(text) else datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            raise InvalidInstant(f"{name} {value!r} is not a calendar date or time ({EXAMPLES})") from None
    else:
        raise InvalidInstant(f"{name} {value!r} is not an ISO 8601 date or time ({EXAMPLES})")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    try:
        return parsed.astimezone(timezone.utc)
    except OverflowError:  # 9999-12-31T23:59-23:59 is a day past the calendar's end in UTC
        raise InvalidInstant(f"{name} {value!r} falls outside the years 1 to 9999 once read as UTC "
                             f"({EXAMPLES})") from None


def parse_interval(valid_from: object, valid_to: object) -> tuple[datetime | None, datetime | None]:
    """Both bounds, each optional (None or ""), refusing an empty or reversed interval."""
    start = None if valid_from in (None, "") else parse_instant(valid_from, "valid_from")
    end = None if valid_to in (None, "") else parse_instant(valid_to, "valid_to")
    if start is not None and end is not None and end <= start:
        raise InvalidInstant(f"valid_to {end.isoformat()} is not after valid_from {start.isoformat()}: "
                             "the document would never be visible")
    return start, end


def is_valid_at(at: datetime, valid_from: datetime | None, valid_to: datetime | None) -> bool:
    return (valid_from is None or valid_from <= at) and (valid_to is None or at < valid_to)
