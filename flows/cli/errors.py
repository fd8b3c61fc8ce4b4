"""What the command line says when it cannot do what was asked: one line saying what happened,
at most one more saying what to do, and an exit code per kind of failure (scripts branch on it).

`explain(exc)` is the only place an exception becomes words and a code; commands raise
`CliError` for refusals of their own and let the library's typed exceptions through.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    FAILED = 1  # unexpected: a bug or an unreadable state; --debug shows the traceback
    USAGE = 2  # a wrong option or value (argparse uses 2 as well)
    NOT_FOUND = 3  # no such document, generation, file or folder
    ACCESS_DENIED = 4  # an unknown or invalid principal, a missing operator token
    NOT_READY = 5  # nothing is serving yet, nothing to roll back to
    REFUSED = 6  # a gate refused: validation, reconcile, embedding space; nothing was published
    BUSY = 7  # another release holds this home's slot past the timeout
    UNAVAILABLE = 8  # a service did not answer (Prefect server, LLM endpoint)
    INTERRUPTED = 130


@dataclass
class Explained:
    code: Exit
    message: str
    hint: str | None = None

    @property
    def kind(self) -> str:
        return self.code.name.lower()

    def as_json(self) -> dict:
        out = {"error": self.message, "code": int(self.code), "kind": self.kind}
        if self.hint:
            out["hint"] = self.hint
        return out

    def lines(self) -> list[str]:
        return [f"mabillon: {self.message}", *([f"  {self.hint}"] if self.hint else [])]


class CliError(Exception):
    """A refusal the command line makes itself (an unknown id, an empty question, ...)."""

    def __init__(self, message: str, code: Exit, hint: str | None = None):
        super().__init__(message)
        self.explained = Explained(code, message, hint)


def _first_line(exc: BaseException) -> str:
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return str(text).strip().splitlines()[0] if str(text).strip() else type(exc).__name__


def _validation_message(exc) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("params",))
        parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
    return "; ".join(parts)


def explain(exc: BaseException) -> Explained:
    """The words and exit code for `exc` (the library's exceptions are matched by type)."""
    if isinstance(exc, CliError):
        return exc.explained
    if isinstance(exc, KeyboardInterrupt):
        return Explained(Exit.INTERRUPTED, "interrupted")
    # imported here: `explain` runs after a failure, and most commands never load these modules
    from pydantic import ValidationError

    from schemas.embedding import EmbeddingInputTooLong, EmbeddingSpaceMismatch
    from schemas.generation import ReconcileFailed, ValidationFailed
    from schemas.release import GateTimedOut
    from schemas.retrieval import AccessDenied
    from tasks.ops.canary import CanaryRefused
    from tasks.ops.switching import GenerationUnavailable, NothingToRollBack
    from tasks.store.serving import NoServingGeneration
    from tasks.access.validity import InvalidAsOf
    from tasks.store.atomic import LockTimeout

    from flows.run_access import Refusal

    text = _first_line(exc)
    if isinstance(exc, Refusal):
        return Explained(Exit[exc.kind.upper()], text)
    if isinstance(exc, AccessDenied):
        return Explained(Exit.ACCESS_DENIED, text)
    if isinstance(exc, NoServingGeneration):
        return Explained(Exit.NOT_READY, "nothing is serving yet in this home",
                         "ingest something first: mabillon ingest PATH (or give --home DIR)")
    if isinstance(exc, NothingToRollBack):
        return Explained(Exit.NOT_READY, text)
    if isinstance(exc, GenerationUnavailable):
        return Explained(Exit.NOT_FOUND, text.split(";")[0], "see: mabillon generations")
    if isinstance(exc, (ValidationFailed, ReconcileFailed, EmbeddingSpaceMismatch)):
        return Explained(Exit.REFUSED, text)
    if isinstance(exc, LockTimeout):
        return Explained(Exit.BUSY, text)
    if isinstance(exc, (EmbeddingInputTooLong, CanaryRefused, InvalidAsOf)):
        return Explained(Exit.USAGE, text)
    if isinstance(exc, GateTimedOut):  # nobody decided: the candidate stays staged, not serving
        return Explained(Exit.REFUSED, text, "decide later with: mabillon promote GEN (or canary)")
    if isinstance(exc, ValidationError):
        return Explained(Exit.USAGE, _validation_message(exc))
    if isinstance(exc, FileNotFoundError):
        return Explained(Exit.NOT_FOUND, f"no such file or folder: {exc.filename or text}")
    if isinstance(exc, LookupError):  # our "no document / no chunk / no generation" refusals
        return Explained(Exit.NOT_FOUND, text)
    if _is_unreachable(exc):
        return Explained(Exit.UNAVAILABLE, text)
    return Explained(Exit.FAILED, f"{type(exc).__name__}: {text}",
                     "this looks like a bug; rerun with --debug for the traceback")


def _is_unreachable(exc: BaseException) -> bool:
    from tasks.llm.base import ProviderError

    if isinstance(exc, (ProviderError, ConnectionError, TimeoutError)):
        return True
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx is a dependency
        return False
    return isinstance(exc, httpx.TransportError)
