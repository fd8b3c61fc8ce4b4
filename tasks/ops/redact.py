"""Scrub a deleted document out of query records: ids, chunk ids and any quoted text of it."""
from __future__ import annotations

import json
from pathlib import Path

from tasks.store.atomic import atomic_write_text

REDACTED = "[redacted: deleted document]"
SLICE = 40  # a quoted window this long is evidence enough that a string carries the text


def needles_for(doc_ids: set[str], chunk_ids: set[str], texts: list[str]) -> list[str]:
    needles = [*doc_ids, *chunk_ids]
    for text in texts:
        flat = " ".join(text.split())
        needles += [flat[i:i + SLICE] for i in range(0, max(1, len(flat) - SLICE + 1), SLICE // 2)
                    if len(flat[i:i + SLICE]) >= min(SLICE, len(flat))]
    return [n for n in needles if n]


def _scrub(value, needles: list[str]):
    if isinstance(value, str):
        flat = " ".join(value.split())
        return REDACTED if any(n in value or n in flat for n in needles) else value
    if isinstance(value, list):
        return [_scrub(v, needles) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, needles) for k, v in value.items()}
    return value


def redact_records(folder: Path, needles: list[str]) -> int:
    """Rewrite every JSON record under `folder` that mentions the document; returns how many."""
    if not folder.exists() or not needles:
        return 0
    changed = 0
    for path in folder.rglob("*.json"):
        raw = path.read_text("utf-8")
        flat = " ".join(raw.split())
        if not any(n in raw or n in flat or json.dumps(n)[1:-1] in raw for n in needles):
            continue
        atomic_write_text(path, json.dumps(_scrub(json.loads(raw), needles), ensure_ascii=False, indent=2))
        changed += 1
    return changed
