"""French text analysis for the lexical channels: the same function reads chunks and queries.

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
def _term(word: str, stem: bool) -> str:
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
    terms = [_term(w, stem) for w in ws]
    if ngrams > 0:
        for w in ws:
            terms.extend("~" + g for g in char_ngrams(fold(w), ngrams))
    return terms


def analyze_word(word: str, stem: bool = True, ngrams: int = 0) -> list[str]:
    """The index terms one word of `words()` contributes to `analyze()` (its term, then its
    n-grams): an index builder analyses each distinct word once."""
    terms = [_term(word, stem)]
    if ngrams > 0:
        terms.extend("~" + g for g in char_ngrams(fold(word), ngrams))
    return terms


def analyzer_id(stem: bool, ngrams: int) -> str:
    """Names the analysis an index was built with; a different analysis is a different index."""
    key = f"{ANALYZER_VERSION}|stem={stem}|ngrams={ngrams}|stop={len(STOPWORDS)}"
    return f"{ANALYZER_VERSION}-" + hashlib.sha256(key.encode()).hexdigest()[:10]


# Question meta-language: words that say what kind of answer is wanted (compare, how does the
# press present…) rather than what it is about. In a question they match every document a
# little and skew BM25 towards chatty ones; measured on the development questions
# (docs/benchmarks.md), dropping them from the question helps every question type.
QUESTION_WORDS = (
    "en 1887 lequel laquelle lesquels lesquelles comment quel quelle quels quelles pourquoi "
    "deux ces différence différences différent diffèrent différemment perspective perspectives "
    "traitement tonalité ton adopte adoptent rapport rapporte rapportent présente présentent "
    "présentation couvert couvre commente commentent commentaire mentionne mentionnent "
    "mentionné mentionnée évoque évoquent évoqués selon chaque respectives respectifs "
    "position positions opinion opinions critique critiques accent met mettent souligne "
    "soulignent aspect aspects ensemble ressort ressortir information informations "
    "presse journal journaux article articles"
)


@functools.lru_cache(maxsize=16)
def _question_terms(stem: bool, corpora: tuple[str, ...]) -> frozenset[str]:
    names = " ".join(c.replace("_", " ") for c in corpora)  # corpus names are cues, not topics
    return frozenset(_term(w, stem) for w in words(QUESTION_WORDS + " " + names))


def question_query(text: str, corpora: tuple[str, ...] = (), stem: bool = True) -> str:
    """A question reduced to what it is about: its words minus question meta-language and the
    names of the sub-corpora (which say where to look, handled by corpus balancing)."""
    drop = _question_terms(stem, tuple(sorted(corpora)))
    kept = [w for w in words(text) if _term(w, stem) not in drop]
    return " ".join(kept)


def named_corpora(text: str, corpora: tuple[str, ...], stem: bool = True) -> list[str]:
    """Sub-corpora a question names (``…entre L'Intransigeant et Le Gaulois…``): a corpus is
    named when a distinctive word of its name — not a stopword or question word such as
    "journal" — occurs in the text."""
    generic = _question_terms(stem, ())
    said = {_term(w, stem) for w in words(text)}
    out = []
    for corpus in corpora:
        marks = {_term(w, stem) for w in words(corpus.replace("_", " "))} - generic
        if marks & said:
            out.append(corpus)
    return out
