"""The refusal a parser raises; in its own module so parsers can raise it without import cycles."""
from __future__ import annotations


class ParseRefused(ValueError):
    """The bytes cannot be parsed into text; the reason is recorded in quarantine."""
