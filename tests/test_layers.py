"""The layers hold: schemas import nothing of ours, tasks never import flows, and the indexes
(`tasks/index`) sit below both ingest and query — read from the imports of every module."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("schemas", "tasks", "flows", "bench", "tests")


def _imports(path: Path) -> set[str]:
    """Every module a file imports (at its top or inside functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _violations(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{p.relative_to(ROOT)} imports {m}" for p in sorted((ROOT / folder).rglob("*.py"))
            for m in sorted(_imports(p)) if m.split(".")[0] in OURS and m.startswith(forbidden)]


@pytest.mark.parametrize("folder, forbidden", [
    ("schemas", tuple(f"{o}" for o in OURS if o != "schemas")),
    ("tasks", ("flows", "bench", "tests")),
    ("tasks/index", ("tasks.query", "tasks.ingest", "tasks.ops", "tasks.reading")),
])
def test_no_module_imports_upward(folder: str, forbidden: tuple[str, ...]):
    assert _violations(folder, forbidden) == []


def test_the_rule_sees_an_upward_import(tmp_path, monkeypatch):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "bad.py").write_text("def f():\n    from flows.cli import main\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", tmp_path)
    assert _violations("tasks", ("flows",)) == ["tasks/bad.py imports flows.cli"]
