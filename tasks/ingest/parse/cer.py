"""Character error rate of OCR output against the text it was made from (ARCHITECTURE §5)."""
from __future__ import annotations

import unicodedata

from rapidfuzz.distance import Levenshtein


def comparable(text: str) -> str:
    """NFC with every run of whitespace as one space: line breaks are layout, not recognition."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def character_error_rate(reference: str, hypothesis: str) -> float:
    """Edits (insertions, deletions, substitutions) per reference character; 0 is perfect."""
    ref, hyp = comparable(reference), comparable(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    return Levenshtein.distance(ref, hyp) / len(ref)
