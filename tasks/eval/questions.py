"""Evaluation questions: one JSON object a line."""
from __future__ import annotations

import json
from pathlib import Path

from schemas.retrieval import EvalQuestion


def load_questions(path: Path, limit: int | None = None) -> list[EvalQuestion]:
    """Read a question set; a malformed line is an error that names the line."""
    out: list[EvalQuestion] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                out.append(EvalQuestion.model_validate(json.loads(line)))
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not a question ({exc})") from exc
            if limit is not None and len(out) >= limit:
                break
    ids = [q.question_id for q in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate question_id")
    return out
