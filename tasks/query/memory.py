"""The agent's working memory and action log, as they enter a prompt.

The five-slot memory is replaced whole by each step's `memory_update`; the action log is
append-only in the state, but only its last N entries are shown, so prompts stay bounded.
"""
from __future__ import annotations

from dataclasses import dataclass
from schemas.query import Memory


@dataclass(frozen=True)
class Action:
    step: int
    kind: str  # search tool, review, finish, or skipped
    detail: str  # what was asked and what came of it, one line


def replace_memory(update: Memory | None, current: Memory) -> Memory:
    """The step's (validated) memory replaces the old one whole; no update keeps the old."""
    return update if update is not None else current


def render_memory(memory: Memory) -> str:
    return "\n".join(f"- {k}: {v or '(empty)'}" for k, v in memory.model_dump().items())


def render_actions(actions: list[Action], last: int) -> str:
    shown = actions[-last:]
    if not shown:
        return "(none yet)"
    return "\n".join(f"{a.step}. {a.kind}: {a.detail}" for a in shown)
