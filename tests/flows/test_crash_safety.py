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
from tasks.store import integrity
from tasks.store.lance_store import open_generation_table
from tasks.store.layout import StoreLayout
from tasks.store.lineage_store import read_lineage_table
from tasks.store.routing import read_routing
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records
from tests.fixtures import make_samples as fx

# one xdist group with the other modules that take the session's Dask cluster (tests/conftest.py GROUP_STACKS)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dask")]


def _more_records() -> list[dict]:
    extra = [{"doc_id": f"registre-{i:03d}", "corpus": "registres", "date": f"1887-04-{i % 28 + 1:02d}",
              "text": " ".join(f"Article {j}. Le conseil municipal délibère sur la voirie du hameau {i}, "
                               f"le budget de l'école et l'entretien du lavoir numéro {j}." for j in range(12))}
             for i in range(40)]
    changed = [dict(r) for r in SAMPLE_RECORDS]
    changed[0]["text"] += " Rectification au procès-verbal demandée par M. Méline."
    return changed + extra


def _first_two(home: Path, inputs: Path) -> None:
    release(paths=[str(write_records(inputs / "first.jsonl", SAMPLE_RECORDS[:2]))], settings=settings_for(home))


def first_release(home_templates, home: Path):
    """Settings of `home`, a copy of a home where g0001 (the first two sample records) serves:
    released once per run, not once per kill."""
    return settings_for(home_templates.copy("first-two-released", _first_two, home))


def _cli(home: Path, export: Path, tmp: Path, point: str | None, prefect: dict[str, str], runner: str = "local",
         **env_extra: str) -> subprocess.Popen:
    # small embedding batches: the embed crash point is reached with most chunks still to embed.
    # With dask the CLI starts its own LocalCluster, whose workers are in the CLI's process group.
    # Its runs report to `prefect` (the session's server): a SIGKILL leaves a run "running"
    # there, which holds nothing (the release slot is a file lock in the home).
    env = dict(os.environ, MABILLON_HOME=str(home), PREFECT_HOME=str(tmp / f"prefect-{point}"),
               MABILLON_EMBEDDING__BATCH_SIZE="2", MABILLON_RUNNER=runner, MABILLON_DASK__WORKERS="2",
               **prefect, **env_extra)
    env.pop("MABILLON_TEST_CRASH_POINT", None)
    if point:
        env["MABILLON_TEST_CRASH_POINT"] = point
    return subprocess.Popen([sys.executable, "-m", "flows.cli", "ingest", str(export), "--json"],
                            cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def _runner_settings(request, runner: str) -> dict:
    """Settings of `runner` for a release in this process (Dask: the session's cluster)."""
    if runner == "local":
        return {"runner": "local"}
    from schemas.settings import DaskSettings

    return {"runner": "dask", "dask": DaskSettings(address=request.getfixturevalue("dask_cluster").scheduler_address)}


def _kill_at_crash_point(proc: subprocess.Popen, marker: Path, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"run ended before the crash point: {proc.stderr.read().decode()[-2000:]}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError("crash point never reached")
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole group: the CLI (and its Dask workers)
    proc.wait()


# Killed mid-embed, Dask workers are writing caches of their own, so both runners are killed
# there; the switch happens in the flow's own process, whatever the runner.
@pytest.mark.parametrize(("point", "runner"), [("embed", "local"), ("embed", "dask"), ("switch", "local")])
def test_sigkill_leaves_serving_untouched_and_next_run_publishes(point: str, runner: str, tmp_path: Path,
                                                                 home: Path, request, home_templates, cli_prefect):
    settings = first_release(home_templates, home)
    layout = StoreLayout.from_settings(settings)
    served_before = open_generation_table(layout, "g0001").to_arrow().sort_by("chunk_id")
    routing_before = layout.routing.read_bytes()

    export = write_records(tmp_path / "second.jsonl", _more_records())
    _kill_at_crash_point(_cli(home, export, tmp_path, point, cli_prefect.client_env(), runner), layout.manifests / f".at-crash-point-{point}")
    cached = {p: p.stat().st_mtime_ns for p in (layout.caches / "vectors").local_path.rglob("*.parquet")}
    if point == "embed":  # killed mid-way: some revisions embedded and cached, most not
        first_run = len(SAMPLE_RECORDS[:2])
        assert first_run < len(cached) < first_run + len(_more_records())

    # the serving generation is exactly as it was, and still readable
    assert layout.routing.read_bytes() == routing_before
    assert read_routing(layout).serving == "g0001"
    assert open_generation_table(layout, "g0001").to_arrow().sort_by("chunk_id").equals(served_before)
    integrity._VERIFIED.clear()
    integrity.verify_generation(layout, "g0001")  # its digests verify after the kill

    # the rerun in this process, on the same runner: what is under test is the state the kill
    # left, and a CLI process would add only its own cold start (and cluster); the CLI's own
    # ingest is tested in tests/ingest/test_formats_e2e.py
    result = release(paths=[str(export)], settings=settings_for(home, **_runner_settings(request, runner)))
    assert result.serving and result.generation != "g0001" and result.run.runner == runner
    assert read_routing(layout).serving == result.generation
    revisions = read_lineage_table(layout, result.generation, "revisions").to_pylist()
    per_source: dict[str, list[dict]] = {}
    for r in revisions:
        per_source.setdefault(r["source_id"], []).append(r)
    assert all(sum(r["is_current"] for r in rs) == 1 for rs in per_source.values())
    # one revision per source, except the one whose content changed (old one kept in lineage)
    assert {s: len(rs) for s, rs in per_source.items() if len(rs) > 1} == {SAMPLE_RECORDS[0]["doc_id"]: 2}
    assert result.counts.sources == len(_more_records())
    # the rerun resumed: what the killed run had embedded was reused, not embedded again
    assert all(p.stat().st_mtime_ns == t for p, t in cached.items())
    assert_one_revision_per_source_and_no_duplicate_chunks(layout, result.generation)
    integrity.verify_generation(layout, result.generation)


def assert_one_revision_per_source_and_no_duplicate_chunks(layout: StoreLayout, generation: str) -> None:
    revisions = read_lineage_table(layout, generation, "revisions").to_pylist()
    current = [r["source_id"] for r in revisions if r["is_current"]]
    assert len(current) == len(set(current))
    served = open_generation_table(layout, generation).to_arrow()
    ids = served["chunk_id"].to_pylist()
    assert len(ids) == len(set(ids))
    texts = list(zip(served["doc_id"].to_pylist(), served["text"].to_pylist()))
    assert len(texts) == len(set(texts))


def test_a_dask_worker_killed_mid_ocr_is_replaced_and_the_release_completes(tmp_path: Path, home: Path, cli_prefect):
    """SIGKILL to the worker process in the middle of an OCR task: Dask runs the task again
    elsewhere, the release completes, one revision per source and no chunk twice."""
    folder = tmp_path / "scans"
    folder.mkdir()
    (folder / "registre.pdf").write_bytes(fx.scanned_pdf_of(["registre-1793", "affiche-1848",
                                                             "etat-civil-1854", "cahier-doleances-1789"]))
    (folder / "acte.png").write_bytes(fx.straight_scan("PNG"))
    write_records(folder / "export.jsonl", SAMPLE_RECORDS)
    layout = StoreLayout.from_settings(settings_for(home))
    marker = layout.manifests / ".at-crash-point-parse"
    # two pages a task: the crash point, after a unit's first piece, is in the middle of OCR work
    proc = _cli(home, folder, tmp_path, "parse", cli_prefect.client_env(), "dask", MABILLON_DASK__PAGES_PER_TASK="2")
    deadline = time.monotonic() + 600
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, "crash point never reached"
        time.sleep(0.2)
    worker = int(marker.read_text())
    assert worker != proc.pid  # a worker process, not the flow
    os.kill(worker, signal.SIGKILL)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()[-3000:]
    result = json.loads(out)
    assert result["serving"] and not result["quarantined"]
    # the export in the folder is read as its records (main: an export dropped in a folder)
    # the killed unit's first piece (2 pages) was OCRed and cached before the kill: the rerun
    # reads it from the page cache, so the run's fresh OCR count is the other 3 of the 5 pages
    assert result["counts"]["sources"] == 2 + len(SAMPLE_RECORDS) and result["run"]["ocr_pages"] >= 3
    assert result["run"]["runner"] == "dask" and result["run"]["workers"] == 2
    assert_one_revision_per_source_and_no_duplicate_chunks(layout, result["generation"])
    pages = read_lineage_table(layout, result["generation"], "pages").to_pylist()
    assert sorted(p["page_no"] for p in pages if p["parser"].startswith("tesseract")) == [1, 1, 2, 3, 4]
