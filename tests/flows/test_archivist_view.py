"""What an archivist sees of a run: a run that refused inputs ends Completed with "N refused" in
its state message and a table of reasons that names no input; stage timings as a table; a CLI
ingest shows its progress on stderr (pages parsed, chunks embedded), and nothing with --json."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.cli.main import main
from flows.timing import stage_markdown, stage_rows
from tasks.ops.disclosure import refusal_reason, refusal_rows
from tests.conftest import SAMPLE_RECORDS

SECRET_NAME = "registre-secret-1790"


def artifacts_of(flow_run_id) -> dict[str, object]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    return {a.key: a.data for a in found if a.key}


def subflow_runs(parent_id) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    with get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[parent_id])))


def table(data) -> list[dict]:
    return json.loads(data) if isinstance(data, str) else data


def test_a_scheduled_run_that_refused_a_file_says_so_in_its_state_and_counts_it_per_reason(tmp_path):
    from flows.drop_folder import ScheduledIngestParams, scheduled_ingest
    from tests.conftest import settings_for

    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "seance.txt").write_text(SAMPLE_RECORDS[0]["text"], "utf-8")
    (drop / f"{SECRET_NAME}.pdf").write_bytes(b"%PDF-1.7\n% not a PDF past its first line\n")
    state = scheduled_ingest(ScheduledIngestParams(drop_folder=str(drop), settle_s=0),
                             settings_for(tmp_path / "home"), return_state=True)
    assert state.is_completed() and state.message.startswith("1 refused: 1 input quarantined")
    result = state.result()
    assert result.published and len(result.quarantined) == 1  # the run still published the good file
    found = artifacts_of(state.state_details.flow_run_id)
    rows = table(found["refused-inputs"])
    assert [r["inputs refused"] for r in rows] == [1] and rows[0]["reason"]
    assert SECRET_NAME not in json.dumps(rows) and str(drop) not in json.dumps(rows)
    summary = found["scheduled-ingest"]
    assert "## Stage timings" in summary and "| parse |" in summary and "| total |" in summary
    assert "stage_seconds" not in summary and "{" not in summary.split("## Stage timings")[0]
    assert SECRET_NAME not in summary
    # its release subflow run: the same state message, and the stage timings as a table
    release_run = subflow_runs(state.state_details.flow_run_id)[0]
    assert release_run.state.is_completed() and release_run.state.message.startswith("1 refused")
    found = artifacts_of(release_run.id)
    rows = table(found["stage-seconds"])
    assert rows[-1]["stage"] == "total" and {"parse", "embed", "publish"} <= {r["stage"] for r in rows}
    assert abs(sum(r["seconds"] for r in rows[:-1]) - rows[-1]["seconds"]) < 0.05
    assert SECRET_NAME not in json.dumps(table(found["refused-inputs"]))


def test_refusal_reasons_lose_every_name_and_keep_the_why():
    uri = f"file:///srv/drop/{SECRET_NAME}.pdf"
    assert refusal_reason(uri, "encrypted PDF (a password is required to read it)") == \
        "encrypted PDF (a password is required to read it)"
    words = refusal_reason(uri, f"unreadable: [Errno 13] Permission denied: '/srv/drop/{SECRET_NAME}.pdf'")
    assert SECRET_NAME not in words and "/srv" not in words and words.startswith("unreadable: [Errno 13]")
    words = refusal_reason(uri, f"zip member \"{SECRET_NAME}/a.xml\" is too large; see {uri}")
    assert SECRET_NAME not in words and "too large" in words

    class Q:
        def __init__(self, name, reason):
            self.uri, self.reason = f"file:///d/{name}", reason

    rows = refusal_rows([Q("a.pdf", "encrypted PDF"), Q("b.pdf", "encrypted PDF"), Q("c.png", "malformed image")])
    assert rows == [{"reason": "encrypted PDF", "inputs refused": 2}, {"reason": "malformed image", "inputs refused": 1}]


def test_stage_timings_are_a_table_with_shares_and_a_total():
    rows = stage_rows({"acquire": 0.5, "parse": 1.5})
    assert rows == [{"stage": "acquire", "seconds": 0.5, "share": "25 %"},
                    {"stage": "parse", "seconds": 1.5, "share": "75 %"},
                    {"stage": "total", "seconds": 2.0, "share": "100 %"}]
    assert stage_markdown({"parse": 1.0})[2] == "| parse | 1.00 | 100 % |" and stage_markdown({}) == []


@pytest.fixture(scope="module")
def cli_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("progress") / "home"


def test_a_cli_ingest_shows_pages_parsed_and_chunks_embedded_on_stderr(cli_home, tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    for r in SAMPLE_RECORDS[:2]:
        (folder / f"{r['doc_id']}.txt").write_text(r["text"], "utf-8")
    assert main(["ingest", str(folder), "--home", str(cli_home)]) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert "mabillon: parse: 2/2 pages" in lines and "mabillon: embed: 2/2 chunks" in lines, err
    assert "generation g0001: published and serving" in out


def test_with_json_a_cli_ingest_prints_no_progress(cli_home, tmp_path, capsys):
    folder = tmp_path / "more"
    folder.mkdir()
    for r in SAMPLE_RECORDS[2:]:
        (folder / f"{r['doc_id']}.txt").write_text(r["text"], "utf-8")
    assert main(["ingest", str(folder), "--json", "--home", str(cli_home)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["run"]["added"] == 2  # it parsed and embedded two new documents
    assert "parse:" not in err and "embed:" not in err and "pages" not in err, err
