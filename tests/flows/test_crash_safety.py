"""A release killed with SIGKILL mid-way leaves the serving generation untouched; the next completes."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.release import release
from schemas.settings import PROJECT_ROOT
from tasks.store.lance_store import open_generation_table
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table
from tasks.store.routing import read_routing
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records

pytestmark = pytest.mark.slow


def _more_records() -> list[dict]:
    extra = [{"doc_id": f"registre-{i:03d}", "corpus": "registres", "date": f"1887-04-{i % 28 + 1:02d}",
              "text": " ".join(f"Article {j}. Le conseil municipal délibère sur la voirie du hameau {i}, "
                               f"le budget de l'école et l'entretien du lavoir numéro {j}." for j in range(12))}
             for i in range(40)]
    changed = [dict(r) for r in SAMPLE_RECORDS]
    changed[0]["text"] += " Rectification au procès-verbal demandée par M. Méline."
    return changed + extra


def _cli(home: Path, export: Path, tmp: Path, point: str | None) -> subprocess.Popen:
    # small embedding batches: the embed crash point is reached with most chunks still to embed
    env = dict(os.environ, MABILLON_HOME=str(home), PREFECT_HOME=str(tmp / f"prefect-{point}"),
               MABILLON_EMBEDDING__BATCH_SIZE="2")
    env.pop("MABILLON_TEST_CRASH_POINT", None)
    if point:
        env["MABILLON_TEST_CRASH_POINT"] = point
    return subprocess.Popen([sys.executable, "-m", "flows.cli", "ingest", str(export), "--json"],
                            cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def _kill_at_crash_point(proc: subprocess.Popen, marker: Path, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"run ended before the crash point: {proc.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError("crash point never reached")
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole group: the CLI and its Prefect server
    proc.wait()


@pytest.mark.parametrize("point", ["embed", "switch"])
def test_sigkill_leaves_serving_untouched_and_next_run_publishes(point: str, tmp_path: Path, home: Path):
    settings = settings_for(home)
    layout = StoreLayout.from_settings(settings)
    release(paths=[str(write_records(tmp_path / "first.jsonl", SAMPLE_RECORDS[:2]))], settings=settings)
    served_before = open_generation_table(layout, "g0001").to_arrow().sort_by("chunk_id")
    routing_before = layout.routing.read_bytes()

    export = write_records(tmp_path / "second.jsonl", _more_records())
    _kill_at_crash_point(_cli(home, export, tmp_path, point), layout.manifests / f".at-crash-point-{point}")
    cached = {p: p.stat().st_mtime_ns for p in (layout.caches / "vectors").local_path.rglob("*.parquet")}
    if point == "embed":  # killed mid-way: some revisions embedded and cached, most not
        first_run = len(SAMPLE_RECORDS[:2])
        assert first_run < len(cached) < first_run + len(_more_records())

    # the serving generation is exactly as it was, and still readable
    assert layout.routing.read_bytes() == routing_before
    assert read_routing(layout).serving == "g0001"
    assert open_generation_table(layout, "g0001").to_arrow().sort_by("chunk_id").equals(served_before)

    rerun = _cli(home, export, tmp_path, None)
    out, err = rerun.communicate(timeout=900)
    assert rerun.returncode == 0, err.decode()[-3000:]
    result = json.loads(out)
    assert result["serving"] and result["generation"] != "g0001"
    assert read_routing(layout).serving == result["generation"]
    revisions = read_lineage_table(layout, result["generation"], "revisions").to_pylist()
    per_source: dict[str, list[dict]] = {}
    for r in revisions:
        per_source.setdefault(r["source_id"], []).append(r)
    assert all(sum(r["is_current"] for r in rs) == 1 for rs in per_source.values())
    # one revision per source, except the one whose content changed (old one kept in lineage)
    assert {s: len(rs) for s, rs in per_source.items() if len(rs) > 1} == {SAMPLE_RECORDS[0]["doc_id"]: 2}
    assert result["counts"]["sources"] == len(_more_records())
    # the rerun resumed: what the killed run had embedded was reused, not embedded again
    assert all(p.stat().st_mtime_ns == t for p, t in cached.items())
