"""Temporal channel: documents scored by exponential decay of their distance in days to a date.

Dates in archive metadata are imperfect (about thirty debate sections of the shared corpus
carry a date that is not their sitting's), so this channel only votes in fusion; it never
filters.
"""
from __future__ import annotations

import numpy as np

from tasks.query.view import NO_DAY, to_day


def decay_scores(days: np.ndarray, date: str, half_life_days: float) -> np.ndarray:
    """exp(-ln2·|Δdays|/half_life) per row; rows without a date score 0."""
    target = to_day(date)
    if target is None:
        raise ValueError(f"unparseable date {date!r} (use YYYY-MM-DD)")
    if half_life_days <= 0:
        raise ValueError("half_life_days must be positive")
    dated = days != NO_DAY
    out = np.zeros(days.shape[0], dtype=np.float32)
    out[dated] = np.exp(-np.log(2.0) * np.abs(days[dated] - target) / half_life_days)
    return out
