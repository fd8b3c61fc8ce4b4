"""Question analysis for the lexical channel: what a question is about, and which sub-corpora
it names. The analysis of words itself (stemming, folding, stopwords) is the lexical index's
(`tasks.index.analyzer`): chunks and queries go through the same function.
"""
from __future__ import annotations

import functools

from tasks.index.analyzer import term, words


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
    return frozenset(term(w, stem) for w in words(QUESTION_WORDS + " " + names))


def question_query(text: str, corpora: tuple[str, ...] = (), stem: bool = True) -> str:
    """A question reduced to what it is about: its words minus question meta-language and the
    names of the sub-corpora (which say where to look, handled by corpus balancing)."""
    drop = _question_terms(stem, tuple(sorted(corpora)))
    kept = [w for w in words(text) if term(w, stem) not in drop]
    return " ".join(kept)


def named_corpora(text: str, corpora: tuple[str, ...], stem: bool = True) -> list[str]:
    """Sub-corpora a question names (``…entre L'Intransigeant et Le Gaulois…``): a corpus is
    named when a distinctive word of its name — not a stopword or question word such as
    "journal" — occurs in the text."""
    generic = _question_terms(stem, ())
    said = {term(w, stem) for w in words(text)}
    out = []
    for corpus in corpora:
        marks = {term(w, stem) for w in words(corpus.replace("_", " "))} - generic
        if marks & said:
            out.append(corpus)
    return out
