"""`mabillon ask QUESTION --export FORMAT`: the answer's references on stdout in ranked order,
read back by the format's library; exported with the asker's access (another tenant's and an
embargoed document never appear), with the library's ARK where the metadata holds one."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from flows.cli.main import main
from tests.conftest import SAMPLE_RECORDS, write_records

QUESTION = "Quand le débat sur les blés de la Brie a-t-il eu lieu ?"
ARK = "ark:/12148/bpt6k4712345x"
SECRET = "b-gaulois-1887-03-03"
EMBARGOED = "jo-1887-03-02-sous-embargo"


@pytest.fixture(scope="module")
def cli_home(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli-export")
    home = root / "home"
    home.mkdir()
    (home / "principals.json").write_text(json.dumps({"bea": {"tenant": "tenant-b", "groups": ["b"]}}), "utf-8")
    records = [dict(r) for r in SAMPLE_RECORDS]
    records[0]["metadata"] = {"source": {"url": f"https://gallica.bnf.fr/{ARK}"}}
    records[1]["metadata"] = {"newspaper": "Le Gaulois"}
    # the same words, where the public may not read them
    records.append({**SAMPLE_RECORDS[0], "doc_id": EMBARGOED, "valid_from": "2999-01-01"})
    records.append({**SAMPLE_RECORDS[1], "doc_id": SECRET, "tenant": "tenant-b", "groups": ["b"]})
    assert main(["ingest", str(write_records(root / "a.jsonl", records)), "--home", str(home)]) == 0
    return home


def ask(capsys, home: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["ask", QUESTION, "--home", str(home), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_ris_on_stdout_in_the_ranked_order_of_the_answer(cli_home, capsys):
    import rispy

    code, out, _ = ask(capsys, cli_home, "--json")
    assert code == 0
    ranked = [d["doc_id"] for d in json.loads(out)["documents"]]
    code, out, err = ask(capsys, cli_home, "--export", "ris")
    assert code == 0, err
    entries = rispy.loads(out)
    assert [e["call_number"] for e in entries] == ranked and len(ranked) >= 3
    assert SECRET not in out and EMBARGOED not in out
    jo = next(e for e in entries if e["call_number"] == "jo-1887-03-02")
    assert jo["accession_number"] == ARK and jo["title"] == "Séance du 2 mars 1887"
    assert jo["date"] == "1887/03/02/" and jo["name_of_database"] == "journal_officiel"
    assert jo["urls"][0].startswith("http://127.0.0.1:4300/queries/")  # the room's default address
    gaulois = next(e for e in entries if e["call_number"] == "gaulois-1887-03-03")
    assert gaulois["secondary_title"] == "Le Gaulois" and "accession_number" not in gaulois
    assert all("generation g0001" in e["notes"][0] and "sha256 " in e["notes"][0] for e in entries)


def test_every_format_reads_back_and_another_tenant_exports_only_its_own(cli_home, capsys):
    import bibtexparser

    code, out, _ = ask(capsys, cli_home, "--export", "bibtex", "--principal", "bea")
    library = bibtexparser.parse_string(out)
    assert code == 0 and [e.key for e in library.entries] == [SECRET]
    code, out, _ = ask(capsys, cli_home, "--export", "csl-json")
    items = json.loads(out)
    assert code == 0 and {i["id"] for i in items} >= {"jo-1887-03-02", "gaulois-1887-03-03"}
    assert next(i for i in items if i["id"] == "jo-1887-03-02")["archive_location"] == ARK
    code, out, _ = ask(capsys, cli_home, "--export", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [r["rank"] for r in rows] == [str(n) for n in range(1, len(rows) + 1)]
    assert SECRET not in out and EMBARGOED not in out


def test_export_and_json_together_are_a_usage_error(cli_home, capsys):
    code, out, err = ask(capsys, cli_home, "--export", "ris", "--json")
    assert code == 2 and "--export" in out + err
