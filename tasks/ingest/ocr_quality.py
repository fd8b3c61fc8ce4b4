"""One OCR-quality value per document (0–1) and where it came from, computed at staging.

The value is the delivery's own confidence where it has one, else our OCR engine's, else an
estimate from the text. In that order:

- `delivered`: the package's word confidence over the article (ALTO WC, metadata
  `ocr.confidence`), else the ALTO pages' confidence as parsed (WC weighted by characters, or
  the page's PC), else the package's per-page PC or BnF's "OCR BRUT nn %" (metadata `ocr.pages`);
- `ocr`: tesseract's word confidence over the pages it read for us;
- `estimated`: the share of the document's words — runs of two or more letters, lower-cased,
  split at apostrophes and hyphens — that the French word list of `wordfreq` (3.1, its "large"
  list, shipped in the wheel: no network) holds. OCR noise makes non-words ("cliambre",
  "dópulés"); proper names and archaic spellings cost a little, evenly across documents.

A document without a word gets no value (None): ranking treats it as unknown, not as bad.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel

from schemas.lineage import ParsedDocument

Source = Literal["delivered", "ocr", "estimated"]
LEXICON_LANGUAGE = "fr"  # the archive's language; wordfreq's list for it is the lexicon
DELIVERED_PARSERS = ("alto", "mets-alto")  # pages whose confidence came with the delivery
WORD = re.compile(r"[^\W\d_]{2,}")  # letters only: digits, punctuation and l'/d' elisions split


class OcrQuality(BaseModel):
    value: float | None  # 0–1, None: unknown
    source: Source | None


@lru_cache(maxsize=1)
def _lexicon() -> frozenset[str]:
    # its words by frequency bucket: the same 311,419 words as get_frequency_dict in 0.25 CPU-s
    # rather than 0.72 (no frequency computed per word), once per process, only when estimating
    from wordfreq import get_frequency_list

    return frozenset(w for bucket in get_frequency_list(LEXICON_LANGUAGE, wordlist="large") for w in bucket)


def lexicon_share(text: str) -> float | None:
    """The share of the text's words the lexicon knows; None for a text without words."""
    words = [w.lower() for w in WORD.findall(text)]
    if not words:
        return None
    known = _lexicon()
    return round(sum(w in known for w in words) / len(words), 4)


def _mean(values: Iterable[float | None]) -> float | None:
    present = [float(v) for v in values if isinstance(v, (int, float))]
    return round(sum(present) / len(present), 4) if present else None


def _weighted(pages: list[tuple[float, int]]) -> float | None:
    chars = sum(n for _, n in pages)
    if not pages:
        return None
    if chars == 0:
        return _mean(c for c, _ in pages)
    return round(sum(c * n for c, n in pages) / chars, 4)


def _delivered_metadata(metadata_json: str | None) -> tuple[float | None, float | None]:
    """(the package's article confidence, the mean of its pages' PC or OCR BRUT)."""
    try:
        ocr = json.loads(metadata_json or "{}").get("ocr") or {}
    except (ValueError, AttributeError):
        return None, None
    if not isinstance(ocr, dict):
        return None, None
    article = ocr.get("confidence")
    pages = ocr.get("pages") or {}
    per_page = [p.get("pc") if p.get("pc") is not None else
                (p["ocr_brut"] / 100.0 if isinstance(p.get("ocr_brut"), (int, float)) else None)
                for p in pages.values() if isinstance(p, dict)] if isinstance(pages, dict) else []
    return (float(article) if isinstance(article, (int, float)) else None), _mean(per_page)


def ocr_quality(doc: ParsedDocument, metadata_json: str | None = None) -> OcrQuality:
    """The document's OCR quality (module docstring: the order of the sources)."""
    article, package_pages = _delivered_metadata(metadata_json)
    if article is not None:
        return OcrQuality(value=round(article, 4), source="delivered")
    alto = [(p.ocr_confidence, len(p.raw_text)) for p in doc.pages
            if p.parser in DELIVERED_PARSERS and p.ocr_confidence is not None]
    if (value := _weighted(alto)) is not None or (value := package_pages) is not None:
        return OcrQuality(value=value, source="delivered")
    engine = [(p.ocr_confidence, len(p.raw_text)) for p in doc.pages
              if p.parser.startswith("tesseract") and p.ocr_confidence is not None]
    if (value := _weighted(engine)) is not None:
        return OcrQuality(value=value, source="ocr")
    value = lexicon_share("\n\n".join(p.raw_text for p in doc.pages))
    return OcrQuality(value=value, source="estimated" if value is not None else None)
