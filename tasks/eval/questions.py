"""Question sets: one JSON object a line, read into a typed question model.

Every question file goes through `load_questions` (evaluation, the batch `ask`, the shadow
comparison); each caller names the model its lines must fit.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from schemas.retrieval import EvalQuestion

Q = TypeVar("Q", bound=BaseModel)


def load_questions(path: Path | str, limit: int | None = None, model: type[Q] = EvalQuestion,
                   default_id: Callable[[int], str] | None = None,
                   unique_ids: bool = True) -> list[Q]:
    """Read a question set; a malformed line is an error that names the line.

    `default_id(n)` names a question whose line gives no `question_id` (n: its 1-based line
    number, blank lines counted); `unique_ids` refuses a set that names one id twice."""
    out: list[Q] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if default_id is not None and isinstance(row, dict) and not row.get("question_id"):
                    row["question_id"] = default_id(n)
                out.append(model.model_validate(row))
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not a question ({exc})") from exc
            if limit is not None and len(out) >= limit:
                break
    ids = [getattr(q, "question_id", None) for q in out]
    if unique_ids and len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate question_id")
    return out
