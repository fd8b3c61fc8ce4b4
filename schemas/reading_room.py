"""What the reading room accepts from a program: the body of `POST /api/ask`."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_QUESTION_CHARS = 2000
MAX_AS_OF_CHARS = 64
MAX_ASK_BODY_BYTES = 64 * 1024  # a question and a date fit many times over


class AskRequest(BaseModel):
    """`{"question": "...", "as_of": "2027-01-01"}`; anything else is refused with its reason."""

    model_config = ConfigDict(extra="forbid", strict=True)

    question: str = Field(..., max_length=MAX_QUESTION_CHARS)
    as_of: str | None = Field(None, max_length=MAX_AS_OF_CHARS,
                              description="ISO 8601 date or time; a future one needs an operator")

    @field_validator("question")
    @classmethod
    def _words(cls, value: str) -> str:
        if len(value.strip()) < 3:
            raise ValueError("write at least three characters")
        return value
