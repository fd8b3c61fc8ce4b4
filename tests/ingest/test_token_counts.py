"""Counting a word at a time (tasks/token_counts.py) gives the tokenizer's own count, text by text."""
import random

import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from schemas.settings import EmbeddingSettings
from tasks.embedding import load_embedder
from tasks.token_counts import WordCounts, adds_over_words

# what OCR and the web put in texts: accents (composed and not), a Greek final sigma, CJK, control
# characters the normalizer removes (\x1f, \x0b, \x0c, \x85: Python splits at them, BERT joins),
# zero-width and replacement characters, Unicode spaces, a word past WordPiece's 100 characters,
# the model's own special tokens written in the text, hyphens, punctuation, emoji
HOSTILE = [
    "", " ", "\n\n", "La séance est ouverte. « Très bien ! » dit M. Floquet.",
    "e\u0301te\u0301 \u0301a a\u0301", "ΟΔΟΣ ΟΔΟΣ. σοφός", "东京 は 大きい", "mot\x1fmot mot\x0bmot",
    "mot\x0cmot a\x85b", "zéro\u200blargeur \ufffd\x00x", "ici\u3000là\u2003et\u00a0là",
    "x" * 101 + " " + "y" * 100, "[CLS] [MASK]x y[SEP]z [UNK]", "porte-\nparole l'abbé d'Orléans",
    "...!!??--", "\t tab\tand\r\ncrlf ", "🙂 emoji🙂x",
]


@pytest.fixture(scope="module")
def minilm():
    return load_embedder(EmbeddingSettings(model="minilm"))


def _plain(backend, texts):
    backend.no_truncation()
    backend.no_padding()
    return [len(enc.ids) for enc in backend.encode_batch_fast(texts, add_special_tokens=True)]


def _random_texts(n: int) -> list[str]:
    rng = random.Random(33)
    alphabet = list("aéeE\u0301 \n\t.,'-«»Σσ东\x1f\x0b\u200b\u3000\u00a0x1[]CLS")
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(n)]


def test_minilm_counts_by_words_as_its_tokenizer_counts_whole_texts(minilm):
    backend = minilm._tokenizer.backend_tokenizer
    assert adds_over_words(backend)
    texts = HOSTILE + _random_texts(400)
    expected = _plain(backend, texts)
    counts = WordCounts(backend)
    assert counts(texts) == expected
    assert counts(list(reversed(texts))) == list(reversed(expected))  # from the cache, the same
    assert minilm.count_tokens(texts) == expected  # the embedder counts this way


def test_the_cache_starts_again_when_full(minilm, monkeypatch):
    backend = minilm._tokenizer.backend_tokenizer
    monkeypatch.setattr(WordCounts, "MAX_WORDS", 5)
    counts = WordCounts(backend)
    texts = ["un deux trois quatre", "cinq six sept huit neuf dix", "un onze"]
    assert [counts([t])[0] for t in texts] == _plain(backend, texts)
    assert len(counts._words) <= 6


def test_a_tokenizer_whose_counts_depend_on_the_neighbours_is_counted_whole():
    vocab = {"[UNK]": 0, "a": 1, "b": 2}
    bert = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    bert.normalizer = normalizers.BertNormalizer()
    bert.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    assert not adds_over_words(bert)  # no post-processor named: not one we know
    metaspace = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    metaspace.pre_tokenizer = pre_tokenizers.Metaspace()  # "▁" marks a word's start: not per word
    assert not adds_over_words(metaspace)


def test_the_guard_before_the_model_counts_whole_texts_not_through_the_word_cache(minilm, monkeypatch):
    """Chunking's counts come from the cache; what the model is given is counted whole, so a
    wrong cache could make chunks too long but never have the model truncate one silently."""
    from schemas.embedding import EmbeddingInputTooLong

    class Undercounting:
        def __call__(self, texts):
            return [1 for _ in texts]

        def forget(self):
            pass

    monkeypatch.setattr(minilm, "_word_counts", Undercounting())
    too_long = "délibération " * (minilm.space.max_input_tokens + 10)
    assert minilm.count_tokens([too_long]) == [1]  # the (broken) cache says it fits
    with pytest.raises(EmbeddingInputTooLong):
        minilm.embed_documents([too_long])
    with pytest.raises(EmbeddingInputTooLong):
        minilm.embed_queries([too_long])
