"""What every benchmark shares: the shared corpus paths, a quiet offline environment, and where
the figures go (bench/results/<name>.json, and the same on stdout)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "histqa1887" / "corpus.jsonl"
DEV = ROOT.parent / "shared" / "histqa1887" / "dev.jsonl"
RESULTS = Path(__file__).resolve().parent / "results"


def free_port() -> int:
    """A free loopback port for a server the benchmark starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def corpus_home(home: Path, source: str | Path | None) -> Path:
    """`home` serving the shared corpus: a copy of `source` (a home that already serves it,
    never changed), or a fresh one the whole corpus is released into."""
    if source:
        shutil.copytree(source, home)
        return home
    from flows.release import release
    from schemas.settings import MabillonSettings

    home.mkdir(parents=True)
    release(paths=[str(CORPUS)], settings=MabillonSettings(home=home))
    return home


def offline_env() -> None:
    """Before Prefect or the models are imported: own Prefect home, no hub, no telemetry."""
    for key, value in {"PREFECT_HOME": tempfile.mkdtemp(prefix="bench-prefect-"),
                       "PREFECT_LOGGING_LEVEL": "WARNING", "HF_HUB_OFFLINE": "1",
                       "GX_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                       "DO_NOT_TRACK": "1"}.items():
        os.environ.setdefault(key, value)


def save_report(name: str, report: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    text = json.dumps(report, indent=2)
    path.write_text(text + "\n")
    print(text)
    return path


def replace_section(path: Path, section: str, text: str) -> None:
    """Put `text` in place of the `section` heading's section of a markdown file (up to the next
    `## ` heading), or append it when the file has no such section yet."""
    doc = path.read_text("utf-8") if path.exists() else "# Benchmarks\n"
    if section in doc:
        head, rest = doc.split(section, 1)
        nxt = rest.find("\n## ")
        doc = head + text + (rest[nxt:] if nxt >= 0 else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    path.write_text(doc, "utf-8")
