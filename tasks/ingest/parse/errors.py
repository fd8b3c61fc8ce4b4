"""The refusal a parser raises; in its own module so parsers can raise it without import cycles."""
from __future__ import annotations

# How a page whose OCR ran out of time says so (its empty_reason starts with it): a refusal of
# the machine's load, not of the page.
OCR_STOPPED = "OCR stopped after"


class ParseRefused(ValueError):
    """The bytes cannot be parsed into text; the reason is recorded in quarantine.

    `lasting`: the same bytes would be refused again under the same parsers and limits (malformed,
    encrypted, a crash of the parser on them), so the refusal is remembered and the bytes are not
    parsed again (tasks/store/refusals.py). A refusal that depends on the moment — a wall-time
    limit reached on a busy machine, a parser bug — is not remembered.
    """

    def __init__(self, reason: str, lasting: bool = True):
        super().__init__(reason)
        self.lasting = lasting
