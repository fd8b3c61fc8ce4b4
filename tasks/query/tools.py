"""The agent's search tools over a `SearchBackend`, with the silent date widening.

The loop depends on the protocol, not on the retriever class, so control flow can be tested
over any backend that answers the same calls.
"""
from __future__ import annotations

import json
import threading
import time
from datetime import date, timedelta
from typing import Any, Protocol

from schemas.retrieval import DocHit, FusedHit, Hit

TOOLS = ("bm25", "dense", "date_range", "substring")


class SearchBackend(Protocol):
    generation: str
    space_id: str

    def bm25_chunks(self, query: str, k: int = 50, corpus: str | None = None,
                    date_from: str | None = None, date_to: str | None = None) -> list[Hit]: ...
    def dense_chunks(self, query: str, k: int = 50, corpus: str | None = None,
                     date_from: str | None = None, date_to: str | None = None) -> list[Hit]: ...
    def date_range_chunks(self, date_from: str, date_to: str, k: int = 50,
                          corpus: str | None = None, query: str | None = None) -> list[Hit]: ...
    def substring_chunks(self, text: str, k: int = 50, corpus: str | None = None) -> list[Hit]: ...
    def bm25_docs(self, query: str, k: int = 50, corpus: str | None = None) -> list[DocHit]: ...
    def dense_docs(self, query: str, k: int = 50, corpus: str | None = None) -> list[DocHit]: ...
    def temporal_docs(self, date: str, k: int = 50, corpus: str | None = None) -> list[DocHit]: ...
    def warm_start(self, query: str, k: int = 50, target_corpus: str | None = None,
                   date: str | None = None) -> list[FusedHit]: ...
    def chunk(self, chunk_id: str) -> Hit: ...
    def corpora(self) -> list[str]: ...


class ToolError(ValueError):
    """Arguments a tool cannot run with; fed back to the agent as a skipped step."""


def search_key(tool: str, args: dict[str, Any]) -> str:
    """Canonical form of a search, to spot duplicates whatever the spacing or case."""
    norm = {k: (" ".join(v.lower().split()) if isinstance(v, str) else v)
            for k, v in sorted(args.items()) if v not in (None, "")}
    return tool + json.dumps(norm, sort_keys=True, ensure_ascii=False)


def _day(s: Any, name: str) -> date:
    try:
        return date.fromisoformat(str(s))
    except ValueError:
        raise ToolError(f"{name} must be an ISO date YYYY-MM-DD, got {s!r}") from None


def check_args(tool: str, args: dict[str, Any], corpora: list[str]) -> dict[str, Any]:
    corpus = args.get("corpus")
    if corpus is not None and corpus not in corpora:
        raise ToolError(f"unknown corpus {corpus!r}; use one of {corpora} or null")
    if tool in ("bm25", "dense"):
        if not str(args.get("query") or "").strip():
            raise ToolError(f"{tool} needs a non-empty 'query'")
        return {"query": args["query"], "corpus": corpus}
    if tool == "substring":
        text = str(args.get("text") or args.get("query") or "").strip()
        if len(text) < 3:
            raise ToolError("substring needs 'text' of at least 3 characters")
        return {"text": text, "corpus": corpus}
    if tool == "date_range":
        lo, hi = _day(args.get("date_from"), "date_from"), _day(args.get("date_to"), "date_to")
        if lo > hi:
            raise ToolError("date_from is after date_to")
        return {"date_from": lo.isoformat(), "date_to": hi.isoformat(), "corpus": corpus,
                "query": args.get("query") or None}
    raise ToolError(f"unknown tool {tool!r}; use one of {list(TOOLS)}")


def run_search(backend: SearchBackend, tool: str, args: dict[str, Any], k: int,
               widen_days: int) -> tuple[list[Hit], list[Hit]]:
    """(hits the agent sees, hits found only by the silent widening of a date search)."""
    if tool == "bm25":
        return [h.found_by(tool) for h in backend.bm25_chunks(args["query"], k, args["corpus"])], []
    if tool == "dense":
        return [h.found_by(tool) for h in backend.dense_chunks(args["query"], k, args["corpus"])], []
    if tool == "substring":
        return [h.found_by(tool) for h in backend.substring_chunks(args["text"], k, args["corpus"])], []
    lo, hi = args["date_from"], args["date_to"]
    wlo = (date.fromisoformat(lo) - timedelta(days=widen_days)).isoformat()
    whi = (date.fromisoformat(hi) + timedelta(days=widen_days)).isoformat()
    # one search over the widened range; what falls outside the asked range is held silently
    hits = backend.date_range_chunks(wlo, whi, k, args["corpus"], args.get("query"))
    inside, outside = [], []
    for h in hits:
        in_range = h.date is not None and lo <= h.date[:10] <= hi
        (inside if in_range else outside).append(h.found_by(tool, widened=not in_range))
    return inside, outside


class TimedBackend:
    """A backend proxy that adds up the seconds spent in retrieval calls (query embedding
    included), so latency can be split into retrieval, loop and model time."""

    def __init__(self, backend: SearchBackend):
        self._backend = backend
        self._lock = threading.Lock()
        self.seconds = 0.0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._backend, name)
        if not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                with self._lock:
                    self.seconds += time.perf_counter() - started
                    self.calls += 1
        return timed
