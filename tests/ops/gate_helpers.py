"""A home with g0001 serving and g0002 staged (one more record), built once and copied per test."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from flows.release import ReleaseOptions, release
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records

CANDIDATE_RECORD = {"doc_id": "temps-1887-03-05", "corpus": "le_temps", "date": "1887-03-05",
                    "text": "Le débat sur les blés viendra jeudi devant la Chambre. Les députés de la "
                            "Brie préparent des amendements sur les droits d'entrée."}
PRINCIPALS = {"alice": {"tenant": "default", "groups": ["public"]},
              "carol": {"tenant": "default", "groups": ["public", "staff"]}}


def build_base(root: Path) -> Path:
    home = root / "home"
    home.mkdir(parents=True)
    (home / "principals.json").write_text(json.dumps(PRINCIPALS), "utf-8")
    settings = settings_for(home)
    release(paths=[str(write_records(root / "a.jsonl", SAMPLE_RECORDS))], settings=settings)
    release(paths=[str(write_records(root / "b.jsonl", [CANDIDATE_RECORD]))],
            options=ReleaseOptions(promote=False), settings=settings)
    return home


LATER_RECORD = {"doc_id": "figaro-1887-03-06", "corpus": "le_figaro", "date": "1887-03-06",
                "text": "Le Figaro. Les fabricants de sucre du Nord réclament une enquête; le ministre "
                        "promet une réponse avant la fin du mois."}


def publish_since(home: Path) -> Path:
    """Publish (ungated) one more record on the serving generation of `home`: a staged candidate
    built before it no longer has what serves as its base."""
    release(paths=[str(write_records(home.parent / "later.jsonl", [LATER_RECORD]))],
            settings=settings_for(home))
    return home


def copy_home(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest)
    return dest
