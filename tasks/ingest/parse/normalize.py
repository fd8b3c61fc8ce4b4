"""Normalised text is derived from raw text and kept apart from it; offsets always refer to raw."""
from __future__ import annotations

import re
import unicodedata

_HYPHEN_BREAK = re.compile(r"(\w)-\s*\n\s*(\w)")
_SPACES = re.compile(r"[ \t\u00a0\u2009\u202f]+")
_BLANKS = re.compile(r"\n{3,}")


def normalize_text(raw: str) -> str:
    """NFC, line-end hyphenation joined, runs of spaces collapsed; paragraph breaks kept."""
    text = unicodedata.normalize("NFC", raw)
    text = _HYPHEN_BREAK.sub(r"\1\2", text)
    text = _SPACES.sub(" ", text)
    text = "\n".join(line.strip() for line in text.splitlines())
    return _BLANKS.sub("\n\n", text).strip()
