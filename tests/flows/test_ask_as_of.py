"""`mabillon ask --as-of` and the `ask` form's as_of: the archive as it stood then; an unreadable
or (for a reader) future time is refused before anything runs, and nothing is written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.ask import AskParams
from flows.cli.main import main
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records

QUESTION = "Que disent les journaux du renvoi du débat sur les blés à jeudi ?"
WITHDRAWN = "intransigeant-1887-03-04"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    from flows.release import release

    home = tmp_path_factory.mktemp("as-of-home")
    records = [dict(r) for r in SAMPLE_RECORDS]
    records[2]["valid_to"] = "2001-01-01"  # withdrawn at the turn of the century
    release(paths=[str(write_records(home / "x.jsonl", records))], settings=settings_for(home))
    return home


def _ask(home: Path, capsys, *extra: str) -> tuple[int, dict]:
    code = main(["ask", QUESTION, "--home", str(home), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def _records(home: Path) -> set[Path]:
    return set((home / "manifests" / "queries").glob("*.json"))


def test_as_of_answers_as_the_archive_stood_then(home, capsys):
    code, now = _ask(home, capsys)
    assert code == 0 and WITHDRAWN not in {d["doc_id"] for d in now["documents"]}
    assert now["as_of"] is None and now["route"] == "serving"
    code, then = _ask(home, capsys, "--as-of", "2000-06-01")
    assert code == 0 and WITHDRAWN in {d["doc_id"] for d in then["documents"]}
    assert then["as_of"].startswith("2000-06-01T00:00:00")
    record = json.loads(Path(then["record"]).read_text("utf-8"))
    assert record["as_of"] == then["as_of"] and record["route"] == "serving"


@pytest.mark.parametrize("value, kind, message", [
    ("hier", "usage", "not an ISO 8601 date or time"),
    ("2000-02-30", "usage", "not a calendar date"),
    ("2999-01-01", "access_denied", "in the future"),
    ("9999-12-31T23:59:59-23:59", "usage", "outside the years 1 to 9999"),  # past the calendar in UTC
    ("0001-01-01T00:00:00+23:59", "usage", "outside the years 1 to 9999"),
    ("٢٠٢٠-٠١-٠١", "usage", "not an ISO 8601 date or time"),  # Arabic-Indic digits
])
def test_a_bad_as_of_is_refused_and_nothing_is_written(home, capsys, value, kind, message):
    before = _records(home)
    code, payload = _ask(home, capsys, "--as-of", value)
    assert code == payload["code"] == {"usage": 2, "access_denied": 4}[kind]
    assert payload["kind"] == kind and message in payload["error"]
    assert _records(home) == before


def test_the_form_refuses_an_unreadable_as_of_before_a_run():
    with pytest.raises(ValueError, match="ISO 8601"):
        AskParams(question=QUESTION, as_of="la semaine dernière")
    assert AskParams(question=QUESTION, as_of="2000-01-01T01:00:00+01:00").as_of == "2000-01-01T00:00:00+00:00"
