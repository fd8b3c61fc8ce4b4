"""SIGKILL at each stage of a release — acquire, parse, publish mid-write and after the routing
switch: the serving generation stays readable and consistent (its digests verify), the rerun
completes, no revision or chunk is duplicated. The kills during embedding and just before the
switch are tests/flows/test_crash_safety.py's, on both runners."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.release import release
from schemas.settings import PROJECT_ROOT
from tasks.access.principals import default_principal
from tasks.query.retriever import Retriever
from tasks.store import integrity
from tasks.store.integrity import verify_generation
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table
from tasks.store.routing import read_routing
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records
from tests.flows.test_crash_safety import _more_records, first_release

pytestmark = pytest.mark.slow

STAGES = {  # stage → where tests/hostile/crash_release.py stops the run
    "acquire": "acquire", "parse": "parse", "publish-mid-write": "publish", "after-switch": "after-switch",
}


def cli(home: Path, export: Path, tmp: Path, stage: str, prefect: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    """The ingest, stopped at `stage`; its runs report to `prefect` (the session's server)."""
    marker = tmp / f"at-{stage}"
    env = dict(os.environ, MABILLON_HOME=str(home), PREFECT_HOME=str(tmp / f"prefect-{stage}"),
               MABILLON_EMBEDDING__BATCH_SIZE="2", HOSTILE_MARKER=str(marker), **prefect)
    env.pop("MABILLON_TEST_CRASH_POINT", None)
    args = ["ingest", str(export), "--json"]
    command = [sys.executable, "-m", "tests.hostile.crash_release", STAGES[stage], *args]
    proc = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    return proc, marker


def kill_when_there(proc: subprocess.Popen, marker: Path, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"run ended before the stop: {proc.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError("stop never reached")
        time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its sandbox child
    proc.wait()


def consistent(settings, generation: str) -> None:
    """Readable, verified, and no duplicate revision or chunk."""
    layout = StoreLayout.from_settings(settings)
    integrity._VERIFIED.clear()
    verify_generation(layout, generation)
    retriever = Retriever.open(settings, default_principal(settings), generation=generation)
    assert retriever.warm_start("débat sur les blés", 5)
    chunks = read_lineage_table(layout, generation, "chunks")["chunk_id"].to_pylist()
    assert len(chunks) == len(set(chunks)) == len(retriever.view)
    revisions = read_lineage_table(layout, generation, "revisions").to_pylist()
    ids = [r["revision_id"] for r in revisions]
    assert len(ids) == len(set(ids))
    current: dict[str, int] = {}
    for r in revisions:
        current[r["source_id"]] = current.get(r["source_id"], 0) + r["is_current"]
    assert set(current.values()) == {1}


@pytest.mark.parametrize("stage", list(STAGES))
def test_sigkill_at_each_stage_leaves_serving_consistent_and_the_rerun_completes(stage, tmp_path, home,
                                                                                  home_templates, cli_prefect):
    settings = first_release(home_templates, home)
    layout = StoreLayout.from_settings(settings)
    routing_before = layout.routing.read_bytes()
    export = write_records(tmp_path / "second.jsonl", _more_records())

    proc, marker = cli(home, export, tmp_path, stage, cli_prefect.client_env())
    kill_when_there(proc, marker)
    serving = read_routing(layout).serving
    if stage == "after-switch":
        assert serving == "g0002"  # the switch happened; the kill came after it
    else:
        assert layout.routing.read_bytes() == routing_before and serving == "g0001"
    consistent(settings, serving)

    # the rerun in this process: what is under test is the state the kill left, and a CLI
    # process would add only its own cold start (the CLI's ingest is tested in tests/flows)
    result = release(paths=[str(export)], settings=settings)
    final = read_routing(layout).serving
    if stage == "after-switch":
        assert result.generation == final == "g0002" and result.run.added == 0  # nothing left to do
    else:
        assert result.serving and final == result.generation != "g0001"
    consistent(settings, final)
    sources = read_lineage_table(layout, final, "sources").num_rows
    assert sources == len(_more_records())
