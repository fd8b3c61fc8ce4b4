"""Homes built once per session and copied for each test that changes them.

A release costs seconds (Prefect runs, embedding, validation, indexes); many tests start from the
same published home and then promote, delete, tear or purge it. Each such home is built once, as
a template nobody touches, and every test gets its own copy: the same files, its own path.
A home holds no absolute path that its readers follow (the layout is derived from the home), so a
copy serves as the original did. Under xdist the template is built once per run, by whichever
worker asks first (the others wait on a file lock, then copy it), not once per worker.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def run_root(tmp_path_factory) -> Path:
    """The temporary folder of this whole test run: above every xdist worker's own."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


def built_once(tmp_path_factory, key: str, build: Callable[[Path], None]) -> Path:
    """The folder `key`, filled by `build(folder)` once in this test run. Treat it as read only:
    copy it to change it. A build that failed half-way is started again by the next asker."""
    root = run_root(tmp_path_factory) / "built-once"
    root.mkdir(exist_ok=True)
    folder, done = root / key, root / f"{key}.built"
    with FileLock(str(root / f"{key}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


class HomeTemplates:
    def __init__(self, tmp_path_factory):
        self.tmp_path_factory = tmp_path_factory
        self.built: dict[str, Path] = {}

    def copy(self, key: str, build: Callable[[Path, Path], None], into: Path) -> Path:
        """`into` holding a copy of the template `key`, built first by `build(home, inputs)` if
        this session has not built it yet (`inputs`: a folder for the records it releases)."""
        if key not in self.built:
            def build_template(folder: Path) -> None:
                (folder / "home").mkdir()
                (folder / "inputs").mkdir()
                build(folder / "home", folder / "inputs")
            self.built[key] = built_once(self.tmp_path_factory, f"template-{key}", build_template) / "home"
        shutil.copytree(self.built[key], into, symlinks=True, dirs_exist_ok=True)
        return into


@pytest.fixture(scope="session")
def home_templates(tmp_path_factory) -> HomeTemplates:
    return HomeTemplates(tmp_path_factory)
