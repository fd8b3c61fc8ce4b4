"""Exact substring search, insensitive to case, accents and runs of whitespace.

No text is held in memory: the lexical index lists, per row, the word tokens of its folded text
(`normalize`), so the rows that can contain a needle are found from the needle's own tokens —
a token with a non-word character on both sides in the needle is a whole token of any row that
contains the needle; one cut on the left only ends a row token, on the right only starts one,
on neither side lies inside one. Only those rows' texts are fetched and counted, so the result is
exact: the narrowing never drops a row that contains the needle.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tasks.index.analyzer import TOKEN, normalize

NARROW_ENOUGH = 5_000  # candidate rows below which further (wide) anchors are not worth reading


def anchors(needle: str) -> list[tuple[str, str]]:
    """(token, how) for each word token of the normalized needle, most selective first;
    how is exact | prefix | suffix | infix, the relation any row containing the needle has
    with one of its own tokens."""
    found = []
    for m in TOKEN.finditer(needle):
        left, right = m.start() > 0, m.end() < len(needle)
        how = "exact" if left and right else "prefix" if left else "suffix" if right else "infix"
        found.append((m.group(), how))
    rank = {"exact": 0, "prefix": 1, "suffix": 2, "infix": 3}
    return sorted(found, key=lambda a: (rank[a[1]], -len(a[0])))


def candidate_rows(needle: str, rows_with_token: Callable[[str, str], np.ndarray]) -> np.ndarray | None:
    """Rows that may contain `needle` (already normalized), or None when its tokens cannot
    narrow anything (a needle of punctuation only)."""
    out: np.ndarray | None = None
    for token, how in anchors(needle):
        if out is not None and out.size <= NARROW_ENOUGH and how != "exact":
            break
        rows = rows_with_token(token, how)
        out = rows if out is None else np.intersect1d(out, rows, assume_unique=True)
        if out.size == 0:
            break
    return out


def occurrence_counts(texts: list[str], needle: str) -> np.ndarray:
    """Occurrences of the normalized `needle` in each text."""
    return np.fromiter((normalize(t or "").count(needle) for t in texts), np.float32, count=len(texts))
