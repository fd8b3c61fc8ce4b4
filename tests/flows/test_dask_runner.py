"""The Dask runner's own guarantees: the parse stack readied as a worker starts, models loaded once
per worker, and a file that kills every
worker that parses it quarantined as "parser crashed" while the rest of the batch is published, and
the parser sandbox on the workers."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from dask.utils import parse_timedelta
from distributed import Client, WorkerPlugin

from flows.release import release
from flows.runner import QUIET_CLUSTER
from schemas.settings import DaskSettings, EmbeddingSettings
from tasks.store.lance_store import open_generation_table
from tasks.store.layout import StoreLayout
from tests.conftest import SAMPLE_RECORDS, settings_for, write_records


# Dask clusters of their own or the session's: end-to-end, run by `make test`, not `make test-fast`;
# one xdist group with the other modules that take the session's Dask cluster (tests/conftest.py GROUP_STACKS)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dask")]


def dask_settings(home: Path, cluster, **overrides):
    return settings_for(home, runner="dask", dask=DaskSettings(address=cluster.scheduler_address), **overrides)


def test_each_worker_loads_the_embedding_model_once_for_many_batches(tmp_path: Path, home: Path, dask_cluster):
    records = [dict(r, doc_id=f"{r['doc_id']}-{i}", text=f"{r['text']} Copie numéro {i}.")
               for i in range(6) for r in SAMPLE_RECORDS]
    settings = dask_settings(home, dask_cluster, embedding=EmbeddingSettings(batch_size=1))  # 4-chunk batches
    result = release(paths=[str(write_records(tmp_path / "copies.jsonl", records))], settings=settings)
    assert result.published and result.counts.chunks >= 4 * 4  # several batches per worker

    def model_loads() -> tuple[int, int]:
        from tasks.embedding import _load_embedder

        info = _load_embedder.cache_info()
        return info.misses, info.hits

    with Client(dask_cluster.scheduler_address) as client:
        loads = client.run(model_loads)
    assert len(loads) == 2
    assert all(misses == 1 for misses, _ in loads.values())  # loaded once per worker process...
    assert sum(hits for _, hits in loads.values()) >= 2  # ...and reused by its later batches


def test_each_worker_readies_the_parse_stack_as_it_starts():
    """flows/dask_preload.py: a worker imports what parse tasks need and starts a parser-sandbox
    child on a thread of its own when it starts, not inside the release's first task."""

    def readied() -> tuple[bool, int]:
        import sys
        import threading
        import time

        from flows.dask_preload import MODULES
        from tasks.ingest.sandbox import _POOL

        deadline = time.monotonic() + 300  # a loaded machine
        while any(t.name == "mabillon-preload" for t in threading.enumerate()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return all(name in sys.modules for name in MODULES), len(_POOL._idle)

    from distributed import LocalCluster

    from flows.runner import local_cluster_options

    with LocalCluster(**local_cluster_options(DaskSettings(workers=2, preload=True))) as cluster, \
            Client(cluster.scheduler_address) as client:
        client.wait_for_workers(2, timeout=120)
        # as a task on each worker's own thread (client.run would hold the worker's event loop)
        states = client.gather([client.submit(readied, workers=[w], allow_other_workers=False, pure=False)
                                for w in client.scheduler_info()["workers"]])
        # without the dashboard's monitoring (flows/runner.py QUIET_CLUSTER), in the workers and
        # the scheduler: no stack sampled every 10 ms, no event-loop check every 20 ms
        monitoring = client.run(lambda dask_worker: (profiler_threads(), dask_worker._tick_interval))
        scheduler_tick = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler._tick_interval)
    assert len(states) == 2 and all(imported and children >= 1 for imported, children in states)
    quiet_tick = parse_timedelta(QUIET_CLUSTER["distributed"]["admin"]["tick"]["interval"])
    assert len(monitoring) == 2 and all(not profilers and tick == quiet_tick for profilers, tick in monitoring.values())
    assert scheduler_tick == quiet_tick


def profiler_threads() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate() if t.name == "Profile"]  # distributed.profile.watch


class PoisonParser(WorkerPlugin):
    """On every worker: parsing the document "poison" kills the worker process (SIGKILL), as a
    segfaulting native parser would; everything else parses as usual."""

    name = "poison-parser"

    def setup(self, worker) -> None:
        from tasks.ingest.parse import units

        self.original = units.read_piece

        def read_piece(data, piece, pages, settings):
            if piece.revision.doc_id == "poison":
                os.kill(os.getpid(), signal.SIGKILL)
            return self.original(data, piece, pages, settings)

        units.read_piece = read_piece

    def teardown(self, worker) -> None:
        from tasks.ingest.parse import units

        units.read_piece = self.original


@pytest.fixture
def poisoned_cluster(dask_cluster):
    with Client(dask_cluster.scheduler_address) as client:
        client.register_plugin(PoisonParser())
        try:
            yield dask_cluster
        finally:
            client.unregister_worker_plugin(PoisonParser.name)
            client.wait_for_workers(2, timeout=120)


def test_a_file_that_kills_every_worker_is_quarantined_and_the_batch_is_published(
        tmp_path: Path, home: Path, poisoned_cluster):
    folder = tmp_path / "arrivage"
    folder.mkdir()
    names = [f"lettre-{i:02d}" for i in range(11)]
    for name in names[:5] + ["poison"] + names[5:]:  # the poison shares a unit with good files
        (folder / f"{name}.txt").write_text(f"Monsieur le Préfet, voici la lettre {name} du registre.", "utf-8")
    settings = dask_settings(home, poisoned_cluster)
    result = release(paths=[str(folder)], settings=settings)
    assert [(Path(q.uri).name, q.reason.split(":")[0]) for q in result.quarantined] == \
        [("poison.txt", "parser crashed")]
    assert result.published and result.counts.sources == len(names)
    served = open_generation_table(StoreLayout.from_settings(settings), result.generation).to_arrow()
    assert sorted(set(served["doc_id"].to_pylist())) == names


def test_on_dask_workers_the_parser_sandbox_quarantines_a_crash_and_the_batch_is_published(
        tmp_path: Path, home: Path, dask_cluster):
    """The parse units run on the workers, and each worker reads them in its own sandbox child:
    a segfault and a runaway allocation there are quarantined with their reasons, the worker
    lives on, and the rest of the batch is published."""
    from schemas.settings import SandboxSettings
    from tests.hostile.crashers import ENTRY

    folder = tmp_path / "versement"
    folder.mkdir()
    names = [f"lettre-{i:02d}" for i in range(6)]
    for name in names:
        (folder / f"{name}.txt").write_text(f"Monsieur le Préfet, voici la lettre {name} du registre.", "utf-8")
    (folder / "crash.txt").write_bytes(b"SEGV Monsieur le Maire, la lettre qui fait tomber le parseur.")
    (folder / "hoard.txt").write_bytes(b"ALLOC Monsieur le Maire, la lettre qui remplit la memoire.")

    def children_started() -> int:
        from tasks.ingest import sandbox

        return sandbox._POOL.started

    with Client(dask_cluster.scheduler_address) as client:
        before = client.run(children_started)
        workers = set(client.scheduler_info()["workers"])
        settings = dask_settings(home, dask_cluster,
                                 sandbox=SandboxSettings(parser=ENTRY, max_memory_bytes=512 << 20))
        result = release(paths=[str(folder)], settings=settings)
        after = client.run(children_started)
        assert set(client.scheduler_info()["workers"]) == workers  # no worker died for it
    reasons = {Path(q.uri).name: q.reason for q in result.quarantined}
    assert sorted(reasons) == ["crash.txt", "hoard.txt"]
    assert reasons["crash.txt"] == "parser crashed: SIGSEGV"
    assert reasons["hoard.txt"].startswith("over the 512 MiB memory limit")
    assert result.published and result.counts.sources == len(names)
    # the children were started on the workers (a fresh one after each crash), not in the flow
    assert sum(after.values()) - sum(before.get(w, 0) for w in after) >= 2
    served = open_generation_table(StoreLayout.from_settings(settings), result.generation).to_arrow()
    assert sorted(set(served["doc_id"].to_pylist())) == names
