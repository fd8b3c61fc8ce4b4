from __future__ import annotations

from tasks.index.analyzer import analyze, char_ngrams, clean, fold, words


def test_fold_removes_case_and_accents():
    assert fold("Élection DÉPUTÉS ça") == "election deputes ca"


def test_line_end_hyphenation_is_rejoined():
    assert "article" in clean("l'ar- ticle")
    assert "règlement" in clean("règle-\nment")


def test_elisions_and_stopwords_are_dropped():
    assert words("L'élection de l'Assemblée qu'il a faite") == ["élection", "assemblée", "faite"]


def test_stemming_conflates_inflections_and_accents():
    assert analyze("députés")[0] == analyze("deputes")[0] == analyze("député")[0]
    assert analyze("élections") == analyze("Election")


def test_char_ngrams_tolerate_an_ocr_slip():
    a, b = set(char_ngrams("ministere", 4)), set(char_ngrams("minislere", 4))
    assert len(a & b) >= len(a) // 2
    assert all(t.startswith("~") for t in analyze("ministère", ngrams=3)[1:])


def test_named_corpora_come_from_distinctive_words_of_corpus_names():
    from tasks.query.analysis import named_corpora

    corpora = ("journal_officiel", "l_intransigeant", "le_gaulois")
    q = "Entre L'Intransigeant et Le Gaulois, lequel critique le plus le ministre ?"
    assert named_corpora(q, corpora) == ["l_intransigeant", "le_gaulois"]
    assert named_corpora("Quel journal rapporte la séance ?", corpora) == []  # generic word
