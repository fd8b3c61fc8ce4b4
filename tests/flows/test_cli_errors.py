"""The command line as a person meets it: exit codes per kind of failure, and the first line of
every error (what happened), the second (what to do); `--json` errors as one JSON document."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cli.main import COMMAND_MODULES, main, make_parser
from tests.conftest import SAMPLE_RECORDS, write_records


def run(capsys, *argv: str) -> tuple[int, str, list[str]]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


@pytest.fixture(scope="module")
def sample_home(tmp_path_factory) -> Path:
    """Two generations: the sample records, then one more record."""
    root = tmp_path_factory.mktemp("cli-errors")
    home = root / "home"
    assert main(["ingest", str(write_records(root / "a.jsonl", SAMPLE_RECORDS[:3])), "--home", str(home)]) == 0
    assert main(["ingest", str(write_records(root / "b.jsonl", SAMPLE_RECORDS[3:])), "--home", str(home)]) == 0
    return home


def test_ask_before_any_ingest_says_nothing_is_serving(tmp_path, capsys):
    code, out, err = run(capsys, "ask", "Qui présidait la séance ?", "--home", str(tmp_path))
    assert code == 5 and out == ""
    assert err == ["mabillon: nothing is serving yet in this home",
                   "  ingest first (mabillon ingest PATH) or give --generation"]


def test_an_empty_question_is_refused_before_anything_runs(tmp_path, capsys):
    code, _, err = run(capsys, "ask", "   ", "--home", str(tmp_path))
    assert code == 2 and err == ["mabillon: the question is empty: write at least three characters"]


def test_an_unknown_or_malformed_principal_is_refused(sample_home, capsys):
    code, _, err = run(capsys, "ask", "la séance", "--principal", "mallory", "--home", str(sample_home))
    assert code == 4 and err[0].startswith("mabillon: unknown principal 'mallory'; add it to ")
    (sample_home / "principals.json").write_text("{not json", "utf-8")
    try:
        code, _, err = run(capsys, "ask", "la séance", "--principal", "alice", "--home", str(sample_home))
        assert code == 4 and "principals.json is not valid JSON" in err[0] and len(err) == 1
    finally:
        (sample_home / "principals.json").unlink()


def test_an_unknown_generation_is_named(sample_home, capsys):
    for argv in (("ask", "la séance", "--generation", "g0042"), ("lineage", "jo-1887-03-02", "--generation", "g0042"),
                 ("diff", "g0001", "g0042"), ("documents", "--generation", "g0042")):
        code, _, err = run(capsys, *argv, "--home", str(sample_home))
        assert code == 3 and err == ["mabillon: no generation 'g0042'", "  see: mabillon generations"], argv
    code, _, err = run(capsys, "promote", "g0042", "--home", str(sample_home))
    assert code == 3 and err == ["mabillon: no generation 'g0042'", "  see: mabillon generations"]


def test_lineage_of_a_typo_suggests_the_id(sample_home, capsys):
    code, _, err = run(capsys, "lineage", "gaulois-1887-03", "--home", str(sample_home))
    assert code == 3 and err == ["mabillon: no document 'gaulois-1887-03' in generation g0002",
                                 "  did you mean gaulois-1887-03-03?"]


def test_documents_lists_filters_and_counts(sample_home, capsys):
    code, out, _ = run(capsys, "documents", "--match", "SÉANCE DU 2", "--home", str(sample_home))
    assert code == 0 and out.splitlines() == [
        "jo-1887-03-02  [journal_officiel, 1887-03-02]  1 chunk  Séance du 2 mars 1887",
        "1 document matching in g0002"]
    code, out, _ = run(capsys, "documents", "--corpus", "le_gaulois", "--json", "--home", str(sample_home))
    assert code == 0 and [d["doc_id"] for d in json.loads(out)["documents"]] == ["gaulois-1887-03-03"]
    code, _, err = run(capsys, "documents", "--corpus", "gaulois", "--home", str(sample_home))
    assert code == 3 and err[0] == "mabillon: no corpus 'gaulois' in generation g0002"


def test_a_missing_ingest_path_is_an_error_and_ingests_nothing(sample_home, capsys):
    code, out, err = run(capsys, "ingest", "/no/such/path", "--home", str(sample_home))
    assert code == 3 and out == ""
    assert err == ["mabillon: no such file or folder: /no/such/path; nothing was ingested"]


def test_shadow_of_a_missing_question_file_is_named(sample_home, capsys):
    code, _, err = run(capsys, "shadow", "g0001", "nope.jsonl", "--home", str(sample_home))
    assert code == 3 and err == ["mabillon: no such question file: nope.jsonl"]


def test_delete_needs_a_reason_and_refuses_an_unknown_id(sample_home, capsys):
    code, _, err = run(capsys, "delete", "jo-1887-03-02", "--home", str(sample_home))
    assert code == 2 and err[0] == "mabillon: the following arguments are required: --reason"
    code, _, err = run(capsys, "delete", "jo-1887-03-2", "--reason", "rights", "--home", str(sample_home))
    assert code == 3 and err == [
        "mabillon: no document 'jo-1887-03-2' in the serving generation; nothing was deleted",
        "  did you mean jo-1887-03-02? --force tombstones an id that is not ingested yet"]
    code, out, err = run(capsys, "delete", "never-ingested-1", "--reason", "refused by the donor",
                         "--force", "--home", str(sample_home))
    assert code == 0, err
    assert "not in the serving generation (tombstoned, as forced): never-ingested-1" in out


def test_json_errors_are_one_document_on_stdout(sample_home, capsys):
    code, out, err = run(capsys, "--json", "lineage", "nope", "--home", str(sample_home))
    assert code == 3 and json.loads(out) == {
        "error": "no document 'nope' in generation g0002", "code": 3, "kind": "not_found",
        "hint": "list ids with: mabillon documents --match TEXT"}
    code, out, _ = run(capsys, "generations", "--bogus", "--json")
    assert code == 2 and json.loads(out)["code"] == 2


def test_global_options_go_before_or_after_the_command(sample_home, capsys):
    code, before, _ = run(capsys, "--home", str(sample_home), "--json", "generations")
    code2, after, _ = run(capsys, "generations", "--home", str(sample_home), "--json")
    assert code == code2 == 0 and json.loads(before) == json.loads(after)
    assert [g["generation"] for g in json.loads(before)] == ["g0001", "g0002"]


def test_version_and_an_example_in_every_command_help(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("mabillon ")
    parser = make_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert len(commands) >= len(COMMAND_MODULES)
    for name, sub in commands.items():
        text = sub.format_help()
        assert "example:\n  mabillon " + name in text, name


def test_promote_says_what_changed_and_generations_say_retired(sample_home, tmp_path, capsys):
    sample_home = shutil.copytree(sample_home, tmp_path / "home")  # it moves routing: its own copy
    code, out, _ = run(capsys, "promote", "g0002", "--home", str(sample_home))
    assert code == 0 and out.strip() == "g0002 is already serving; nothing changed"
    code, out, _ = run(capsys, "rollback", "--reason", "check", "--home", str(sample_home))
    assert code == 0 and out.startswith("serving g0001 (rollback by ") and out.rstrip().endswith(": check")
    code, out, _ = run(capsys, "--json", "generations", "--home", str(sample_home))
    statuses = {g["generation"]: g["status"] for g in json.loads(out)}
    assert statuses == {"g0001": "serving", "g0002": "retired"}  # served before: not "staged"
    code, out, _ = run(capsys, "promote", "g0002", "--reason", "back", "--home", str(sample_home))
    assert code == 0 and out.startswith("serving g0002 (promote by ")


def test_diff_after_a_deletion_names_the_removal(sample_home, tmp_path, capsys):
    sample_home = shutil.copytree(sample_home, tmp_path / "home")  # it adds g0003: its own copy
    code, out, err = run(capsys, "delete", "jo-1887-03-10", "--reason", "rights request", "--home",
                         str(sample_home))
    assert code == 0, err
    code, out, _ = run(capsys, "diff", "g0002", "g0003", "--home", str(sample_home))
    lines = out.splitlines()
    assert lines[1] == "sources: 0 added, 0 changed, 1 removed, 3 unchanged"
    assert "  - jo-1887-03-10" in lines and lines[-3].startswith("chunks: ") and "(-1)" in lines[-3]
    code, out, _ = run(capsys, "generations", "--home", str(sample_home))
    g2 = next(line for line in out.splitlines() if line.startswith("g0002"))
    assert "sources 3" in g2 and "published with 4 sources" in g2  # the purge shows


def test_read_only_commands_never_import_prefect(sample_home):
    # nor the models, validation or Dask: each costs a cold command seconds (a test's subprocess
    # too); only the commands that ingest, embed or validate import them
    heavy = ("prefect", "torch", "sentence_transformers", "docling", "great_expectations", "distributed")
    code = ("import sys; from flows.cli.main import main; "
            f"rc = [main([c, *a, '--home', {str(sample_home)!r}]) for c, a in "
            "[('generations', []), ('documents', []), ('lineage', ['gaulois-1887-03-03']), "
            "('diff', ['g0001', 'g0002'])]]; "
            f"assert rc == [0, 0, 0, 0], rc; imported = [m for m in {heavy!r} if m in sys.modules]; "
            "assert not imported, f'imported {imported}'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_executable_keeps_exit_codes_and_whole_output_when_it_leaves_at_once(sample_home, capsys):
    # the `mabillon` script leaves without interpreter teardown where no Prefect ran
    mabillon = Path(sys.executable).with_name("mabillon")
    done = subprocess.run([str(mabillon), "--json", "lineage", "nope", "--home", str(sample_home)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and json.loads(done.stdout)["kind"] == "not_found"
    done = subprocess.run([str(mabillon), "documents", "--home", str(sample_home), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    code, here, _ = run(capsys, "documents", "--home", str(sample_home), "--json")
    assert code == 0 and json.loads(done.stdout) == json.loads(here)  # all of it through the pipe
