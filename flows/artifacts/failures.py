"""A failed run, said in words in the UI: what went wrong and what the reader can do.

The words never carry a server path, a traceback, or anything that tells whether a principal
exists; the details of an unexpected failure stay in the serving process's own log.
"""
from __future__ import annotations

import logging

from tasks.markup import md_text

log = logging.getLogger(__name__)

INTERNAL = ("An internal error stopped this run; nothing was changed by it. The operator finds the "
            "details in the log of `mabillon serve` under this run's name.")


def failure_words(exc: BaseException) -> str:
    """What a UI user is told about `exc`."""
    from flows.run_access import Refusal
    from schemas.embedding import EmbeddingSpaceMismatch
    from schemas.generation import ReconcileFailed, ValidationFailed
    from schemas.retrieval import AccessDenied
    from tasks.ops.switching import GenerationUnavailable
    from tasks.store.serving import NoServingGeneration
    from tasks.store.atomic import LockTimeout

    from tasks.ops.canary import CanaryRefused

    if isinstance(exc, (Refusal, CanaryRefused)):  # words meant for the operator who asked
        return str(exc)
    if isinstance(exc, AccessDenied):
        return "Access refused: invalid access token, or an action your token does not allow."
    if isinstance(exc, NoServingGeneration):
        return ("Nothing is published yet, so there is nothing to search: an operator must ingest "
                "documents first.")
    if isinstance(exc, GenerationUnavailable):
        return f"{str(exc).split(';')[0]}. Choose one of the generations the form offers."
    if isinstance(exc, EmbeddingSpaceMismatch):
        return ("This generation was indexed with another embedding model than the one this server "
                "queries with; choose another generation or ask the operator.")
    if isinstance(exc, (ValidationFailed, ReconcileFailed)):
        return ("The release checks refused the new generation, so nothing was published and the "
                "previous generation still serves. The report names each failed check.")
    if isinstance(exc, LockTimeout):
        return "Another release or promotion held this archive's slot too long; run this again later."
    return INTERNAL


def failure_markdown(action: str, words: str) -> str:
    # the words may quote what the user typed (an id, a generation): shown as text
    return f"# {md_text(action)} did not complete\n\n{md_text(words)}"


def publish_failure(action: str, exc: BaseException) -> str:
    """A markdown artifact saying why `action` failed; returns the words (the run's state message)."""
    from prefect.artifacts import create_markdown_artifact

    words = failure_words(exc)
    if words == INTERNAL:
        log.exception("%s failed", action)  # the traceback goes to the serving process's log only
    create_markdown_artifact(key="failure", markdown=failure_markdown(action, words),
                             description=f"why this {action} run failed")
    return words
