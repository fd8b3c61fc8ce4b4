"""The time rule of authorization: a chunk is a candidate only while the query time is inside its
validity interval [valid_from, valid_to) (schemas.validity).

The query time is `as_of` when a query names one, otherwise the moment of each search, so an
embargo ends by itself, with no new generation: the mask at a time is cached until the next
bound any chunk has, and recomputed after it. `as_of` may look back (what the archive showed
then); looking ahead, past an embargo, is for operators only.
"""
from __future__ import annotations

import threading
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.retrieval import AccessDenied, Principal
from schemas.validity import InvalidInstant, parse_instant

_OPEN_LOW = np.iinfo(np.int64).min
_OPEN_HIGH = np.iinfo(np.int64).max
UTC_MICROS = pa.timestamp("us", tz="UTC")


class InvalidAsOf(ValueError):
    """An `as_of` that is not an ISO 8601 date or time."""


class AsOfAhead(AccessDenied):
    """An `as_of` in the future asked by someone who may not look past an embargo."""


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def resolve_as_of(value: str | datetime | None, principal: Principal,
                  now: datetime | None = None) -> datetime | None:
    """The query time a principal asked for: None (the time of each search) or a UTC instant.

    Refuses an unreadable value (InvalidAsOf) and, for anyone but an operator, a time in the
    future (AsOfAhead, an AccessDenied): that would show documents still under embargo.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        at = parse_instant(value, "as_of")
    except InvalidInstant as exc:
        raise InvalidAsOf(str(exc)) from None
    if at > (now or now_utc()) and not principal.is_operator:
        raise AsOfAhead(f"as_of {at.isoformat()} is in the future; documents under embargo "
                           "are not shown before their time (only an operator may look ahead)")
    return at


def to_micros(at: datetime) -> int:
    return int(pa.scalar(at.astimezone(timezone.utc), UTC_MICROS).value)


def _bounds(table: pa.Table, column: str, fill: int) -> np.ndarray:
    if column not in table.schema.names:
        return np.full(table.num_rows, fill, dtype=np.int64)
    values = pc.cast(table.column(column), UTC_MICROS).cast(pa.int64())
    return pc.fill_null(values, fill).to_numpy(zero_copy_only=False).astype(np.int64)


class ValidityWindow:
    """Per-row validity bounds (microseconds, UTC) and the mask at a time, cached until the
    nearest bound on either side of that time."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        self.bounded = bool((starts != _OPEN_LOW).any() or (ends != _OPEN_HIGH).any())
        if not self.bounded:  # every row always valid: keep no per-row arrays
            starts, ends = starts[:0], ends[:0]
        self.starts, self.ends = starts, ends
        # every bound, sorted: between two consecutive ones the mask cannot change
        self._edges = np.unique(np.concatenate([starts[starts != _OPEN_LOW], ends[ends != _OPEN_HIGH]]))
        self._cached: tuple[int, int, np.ndarray] | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, table: pa.Table) -> "ValidityWindow":
        """From the table's valid_from / valid_to columns; absent columns or nulls are open."""
        return cls(_bounds(table, "valid_from", _OPEN_LOW), _bounds(table, "valid_to", _OPEN_HIGH))

    def span_at(self, at: datetime) -> tuple[int, int]:
        """[lo, hi): the interval around `at` in which no chunk's validity changes."""
        t = to_micros(at)
        i = int(np.searchsorted(self._edges, t, side="right"))
        lo = int(self._edges[i - 1]) if i > 0 else _OPEN_LOW
        hi = int(self._edges[i]) if i < len(self._edges) else _OPEN_HIGH
        return lo, hi

    def mask_at(self, at: datetime) -> np.ndarray | None:
        """Rows valid at `at`; None when no row has a bound (all always valid)."""
        if not self.bounded:
            return None
        t = to_micros(at)
        with self._lock:
            cached = self._cached
            if cached is not None and cached[0] <= t < cached[1]:
                return cached[2]
            lo, hi = self.span_at(at)
            mask = (self.starts <= t) & (t < self.ends)
            self._cached = (lo, hi, mask)
            return mask


def validity_where(at: datetime) -> str:
    """The same rule as a LanceDB/DataFusion filter (columns valid_from, valid_to)."""
    # isoformat, not strftime: glibc writes the year 1 as "1", not "0001"
    utc = at.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds")
    literal = f"TIMESTAMP '{utc}Z'"
    return (f"(valid_from IS NULL OR valid_from <= {literal}) AND "
            f"(valid_to IS NULL OR valid_to > {literal})")
