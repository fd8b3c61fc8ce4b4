"""Token counts of document texts, a word at a time, for tokenizers whose counts add up over words.

Chunking counts every sentence of a page, then every chunk it packs: the page is tokenized
twice, as ≈ 450 texts a newspaper page, and that was 70 % of chunking's time. A BERT WordPiece
tokenizer (MiniLM's) counts a text as its special tokens plus the tokens of each of its
whitespace-separated words, each word on its own: the normalizer works a character at a time,
the pre-tokenizer splits at whitespace (and punctuation) and WordPiece reads one piece at a time.
So the count of a text is the specials plus the sum of its words' counts, and a word's count is
the same in every text: counted once, it is looked up after, and a newspaper's vocabulary repeats.

Only tokenizers built of exactly those parts are counted this way (`adds_over_words`); any other
is counted whole, text by text. Words are split only at space, tab, CR and LF: characters every
such tokenizer treats as whitespace, never removes and never joins across (Python's `str.split`
also splits at control characters the normalizer removes, which would join their neighbours).
"""
from __future__ import annotations

import json
import re

import numpy as np

_WORD = re.compile(r"[^ \t\n\r]+")
_NORMALIZERS = {"BertNormalizer"}  # character-local: clean text, CJK spacing, accents, lower case
_PRE_TOKENIZERS = {"BertPreTokenizer"}  # splits at whitespace and punctuation, nothing across them
_MODELS = {"WordPiece"}  # one pre-token at a time (too long a one is one [UNK])
_POST_PROCESSORS = {"TemplateProcessing", "BertProcessing"}  # a fixed set of specials around it


def adds_over_words(backend) -> bool:
    """Whether `backend` (a `tokenizers.Tokenizer`) counts a text as its specials plus the sum of
    its words' counts. Added tokens could break that if one held whitespace (a match across
    words) or matched only as a single word (a match that depends on the neighbours)."""
    config = json.loads(backend.to_str())
    parts = (config.get("normalizer") or {}, config.get("pre_tokenizer") or {},
             config.get("model") or {}, config.get("post_processor") or {})
    if not all(part.get("type") in allowed for part, allowed in
               zip(parts, (_NORMALIZERS, _PRE_TOKENIZERS, _MODELS, _POST_PROCESSORS))):
        return False
    return all(not added.get("single_word") and _WORD.fullmatch(added.get("content", "")) is not None
               for added in config.get("added_tokens") or [])


class WordCounts:
    """Token counts through a cache of word counts, for a tokenizer `adds_over_words` accepts.

    Not thread-safe: the caller holds the tokenizer's lock (a fast tokenizer fails when two
    threads use it at once) and has cleared its truncation and padding, as for counting whole."""

    MAX_WORDS = 200_000  # cached words (≈ 20 MB); past it the cache starts again

    def __init__(self, backend):
        self._backend = backend
        self._specials = backend.num_special_tokens_to_add(False)  # [CLS] and [SEP] around one text
        self._words: dict[str, int] = {}

    def forget(self) -> None:
        """Every word counted anew from now on (the bench's cold case: a page of unseen words)."""
        self._words.clear()

    def __call__(self, texts: list[str]) -> list[int]:
        words = self._words
        split = [_WORD.findall(t) for t in texts]
        missing = list({w for ws in split for w in ws if w not in words})
        if missing:
            if len(words) + len(missing) > self.MAX_WORDS:
                words.clear()
                missing = list({w for ws in split for w in ws})
            words.update(zip(missing, self._count_words(missing)))
        specials = self._specials
        return [specials + sum(map(words.__getitem__, ws)) for ws in split]

    def _count_words(self, missing: list[str]) -> list[int]:
        """Each word's tokens, from one encoding of the words joined by spaces (one text costs
        less than one text a word: ≈ 7 against 10 µs a word): a token belongs to the word its
        first character is in."""
        encoding = self._backend.encode(" ".join(missing), add_special_tokens=False)
        lengths = np.fromiter(map(len, missing), dtype=np.int64, count=len(missing))
        starts = np.cumsum(lengths + 1) - (lengths + 1)
        token_starts = np.fromiter((start for start, _ in encoding.offsets), dtype=np.int64,
                                   count=len(encoding.offsets))
        owner = np.searchsorted(starts, token_starts, side="right") - 1
        return np.bincount(owner, minlength=len(missing)).tolist()
