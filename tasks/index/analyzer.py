"""French text analysis for the lexical index: the same function reads chunks and queries.

Order matters: the Snowball French stemmer expects accented lower-case words, so we stem
first and fold accents afterwards; folding also makes OCR's dropped accents match. Line-end
hyphenation (``ar- ticle``) is rejoined and elisions (``l'``, ``qu'``) are split off before
tokenising, because 1887 OCR is full of both.
"""
from __future__ import annotations

import functools
import hashlib
import re
import threading
import unicodedata

from bm25s.stopwords import STOPWORDS_FRENCH

ANALYZER_VERSION = "fr-1"

_HYPHEN_BREAK = re.compile(r"(\w)[-¬]\s*\n\s*(\w)|(\w)- (\w)")
_ELISION = re.compile(r"\b(?:[cdjlmnst]|qu|jusqu|lorsqu|puisqu|quoiqu)['’]", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SPACE = re.compile(r"\s+")
# The word tokens of a normalized text (`normalize`): what the lexical index lists per row so
# that exact substring search can narrow its candidates (tasks/query/substring.py).
TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

# Snowball's list plus the elided and clitic forms our tokenizer leaves behind.
STOPWORDS: frozenset[str] = frozenset(STOPWORDS_FRENCH) | {
    "a", "à", "y", "les", "cette", "cet", "ces", "dont", "où", "qui", "que", "quoi", "sont",
    "été", "être", "fait", "comme", "plus", "tout", "tous", "toute", "toutes", "par", "sur",
    "sans", "sous", "entre", "leur", "leurs", "ni", "si", "mais", "ou", "donc", "car",
}


def fold(text: str) -> str:
    """Lower-case without accents: ``Élection`` → ``election``."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def clean(text: str) -> str:
    """Rejoin words cut at line ends and drop elided articles before tokenising."""
    text = _HYPHEN_BREAK.sub(lambda m: (m.group(1) or m.group(3)) + (m.group(2) or m.group(4)),
                             text)
    return _ELISION.sub(" ", text)


_LOCAL = threading.local()


def _stemmer():
    """One Snowball stemmer per thread: PyStemmer objects are not thread-safe, and questions
    are answered concurrently."""
    stemmer = getattr(_LOCAL, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = _LOCAL.stemmer = Stemmer.Stemmer("french")
    return stemmer


@functools.lru_cache(maxsize=200_000)
def term(word: str, stem: bool) -> str:
    """The index term of one word of `words()`: stemmed (or not), then folded."""
    return fold(_stemmer().stemWord(word) if stem else word)


def words(text: str) -> list[str]:
    """Lower-cased words of the cleaned text, stopwords and one-letter tokens removed."""
    return [w for w in _WORD.findall(clean(text).lower()) if len(w) > 1 and w not in STOPWORDS]


def char_ngrams(term: str, n: int) -> list[str]:
    """Character n-grams of a word padded with boundaries, so OCR slips cost one gram, not a
    whole word (``#ministere#`` shares most grams with ``#minislere#``)."""
    padded = f"#{term}#"
    if len(padded) <= n:
        return [padded]
    return [padded[i:i + n] for i in range(len(padded) - n + 1)]


def analyze(text: str, stem: bool = True, ngrams: int = 0) -> list[str]:
    """Index terms of a text: stemmed, folded words, plus ``~``-prefixed char n-grams of the
    folded words when ``ngrams`` > 0 (the prefix keeps the two vocabularies apart)."""
    ws = words(text)
    terms = [term(w, stem) for w in ws]
    if ngrams > 0:
        for w in ws:
            terms.extend("~" + g for g in char_ngrams(fold(w), ngrams))
    return terms


def analyze_word(word: str, stem: bool = True, ngrams: int = 0) -> list[str]:
    """The index terms one word of `words()` contributes to `analyze()` (its term, then its
    n-grams): an index builder analyses each distinct word once."""
    terms = [term(word, stem)]
    if ngrams > 0:
        terms.extend("~" + g for g in char_ngrams(fold(word), ngrams))
    return terms


def analyzer_id(stem: bool, ngrams: int) -> str:
    """Names the analysis an index was built with; a different analysis is a different index."""
    key = f"{ANALYZER_VERSION}|stem={stem}|ngrams={ngrams}|stop={len(STOPWORDS)}"
    return f"{ANALYZER_VERSION}-" + hashlib.sha256(key.encode()).hexdigest()[:10]


def normalize(text: str) -> str:
    """Folded text with runs of whitespace made one space: what exact substring search compares."""
    return _SPACE.sub(" ", fold(text)).strip()
