"""Exact substring search, insensitive to case, accents and runs of whitespace."""
from __future__ import annotations

import re

import numpy as np

from tasks.query.analysis import fold

_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    return _SPACE.sub(" ", fold(text)).strip()


def occurrence_scores(folded_texts: list[str], needle: str, mask: np.ndarray) -> np.ndarray:
    """Occurrences of `needle` in each allowed row (0 elsewhere); other rows are never read."""
    out = np.zeros(len(folded_texts), dtype=np.float32)
    pattern = normalize(needle)
    if not pattern:
        return out
    for row in np.flatnonzero(mask):
        out[row] = folded_texts[row].count(pattern)
    return out
