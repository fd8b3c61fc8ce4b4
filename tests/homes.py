"""Homes built once per session and copied for each test that changes them.

A release costs seconds (Prefect runs, embedding, validation, indexes); many tests start from the
same published home and then promote, delete, tear or purge it. Each such home is built once, as
a template nobody touches, and every test gets its own copy: the same files, its own path.
A home holds no absolute path that its readers follow (the layout is derived from the home), so a
copy serves as the original did.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


class HomeTemplates:
    def __init__(self, root: Path):
        self.root = root
        self.built: dict[str, Path] = {}

    def copy(self, key: str, build: Callable[[Path, Path], None], into: Path) -> Path:
        """`into` holding a copy of the template `key`, built first by `build(home, inputs)` if
        this session has not built it yet (`inputs`: a folder for the records it releases)."""
        if key not in self.built:
            template, inputs = self.root / key / "home", self.root / key / "inputs"
            template.mkdir(parents=True)
            inputs.mkdir()
            build(template, inputs)
            self.built[key] = template
        shutil.copytree(self.built[key], into, symlinks=True, dirs_exist_ok=True)
        return into


@pytest.fixture(scope="session")
def home_templates(tmp_path_factory) -> HomeTemplates:
    return HomeTemplates(tmp_path_factory.mktemp("home-templates"))
