"""Where the release's tasks run: the task runner the settings choose (MABILLON_RUNNER).

`local` (the default) runs tasks on threads of the flow's own process: no server, no cluster.
Threads are real parallelism for OCR (tesseract runs outside the GIL) and the native parsers
hold their own locks. `dask` runs them on prefect-dask's DaskTaskRunner: a distributed
LocalCluster of worker processes (one thread each; tesseract, OpenMP and torch at one thread,
since the processes are the parallelism), or an existing cluster's scheduler
(MABILLON_DASK__ADDRESS: a dask-jobqueue, dask-kubernetes or hand-started cluster). The flow
code is the same on both: stages submit their tasks with `.submit`, Prefect and Dask schedule.
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from prefect.context import FlowRunContext
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from schemas.settings import DaskSettings, EmbeddingSettings, MabillonSettings, ParseSettings
from tasks.ingest import crash_points
from tasks.ingest.parse.units import FanOut

# Worker processes share the cores among themselves; a library that starts a thread per core
# in each of them (OpenMP in tesseract, torch, BLAS) would oversubscribe the machine.
WORKER_ENV = {"OMP_NUM_THREADS": "1", "OMP_THREAD_LIMIT": "1", "MKL_NUM_THREADS": "1",
              "OPENBLAS_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
# Dask's monitoring feeds its dashboard, which a cluster Mabillon starts does not have: the
# statistical profiler samples every thread's stack every 10 ms, the event-loop check runs every
# 20 ms, the system monitor every 0.5 s, in each worker and in the process that owns the cluster.
# An idle LocalCluster of two workers: 7.89 CPU-s a minute with them, 2.20 without
# (bench/bench_dask_idle.py, docs/benchmarks.md). The nanny's memory watch (pause, spill,
# terminate) keeps its interval.
QUIET_CLUSTER = {"distributed": {"worker": {"profile": {"enabled": False}},
                                 "admin": {"tick": {"interval": "1s"},
                                           "system-monitor": {"interval": "5s"}}}}


def local_cluster_options(dask: DaskSettings, preload: bool | None = None) -> dict:
    """distributed.LocalCluster arguments: worker processes of one thread each; with `preload`
    (default: `dask.preload`) each readies the parse stack as it starts (flows/dask_preload.py).
    Also puts QUIET_CLUSTER in this process's Dask configuration (quiet_cluster), where the
    cluster's scheduler and nannies read it: no LocalCluster options carry it to them."""
    preload = dask.preload if preload is None else preload
    quiet_cluster()
    return dict(n_workers=max(1, dask.workers), threads_per_worker=1, processes=True,
                memory_limit=dask.memory_limit or "auto", env=dict(WORKER_ENV),
                dashboard_address=None, silence_logs=logging.WARNING,
                scheduler_kwargs={"allowed_failures": dask.allowed_failures},
                **({"preload": ["flows.dask_preload"]} if preload else {}))


def quiet_cluster() -> None:
    """QUIET_CLUSTER in this process's Dask configuration: the scheduler and nannies a
    LocalCluster starts here read it, and the nannies hand it to their worker processes."""
    import dask

    dask.config.update(dask.config.config, QUIET_CLUSTER, priority="new")


def task_runner_for(settings: MabillonSettings) -> TaskRunner:
    if settings.runner == "dask":
        from prefect_dask import DaskTaskRunner

        # the scheduler of a LocalCluster lives in this process: its INFO lines are not for users
        logging.getLogger("distributed").setLevel(logging.WARNING)
        if settings.dask.address:
            return DaskTaskRunner(address=settings.dask.address)
        return DaskTaskRunner(cluster_class="distributed.LocalCluster",
                              cluster_kwargs=local_cluster_options(settings.dask))
    return ThreadPoolTaskRunner(max_workers=max(1, settings.ocr.workers))


@contextlib.contextmanager
def api_for_workers(settings: MabillonSettings) -> Iterator[None]:
    """Make the Prefect API the flow reports to reachable by the Dask workers too.

    With no PREFECT_API_URL, Prefect starts a temporary server inside each process that needs
    one: every worker would start its own and record its task runs there. So the flow's
    temporary server is started first and named in the settings, which the task runner hands
    to every task it sends to a worker.
    """
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if settings.runner != "dask" or PREFECT_API_URL.value():
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the one temporary server of this process (stopped at exit)
    server.start()
    with temporary_settings({PREFECT_API_URL: server.api_url}):
        yield


def arm_crash_point(point: str | None) -> None:
    """The crash-safety tests' hook (tasks/ingest/crash_points.py), armed once for the run: in
    this process, and on the Dask workers of the flow run's task runner, where parse and embed
    tasks stop. Nothing is sent to workers when no point is set."""
    crash_points.arm(point)
    runner = FlowRunContext.get().task_runner if FlowRunContext.get() else None
    client = getattr(runner, "client", None) if point is not None else None
    if client is not None:
        from flows.worker_crash_points import ArmWorkers

        client.register_plugin(ArmWorkers(point))


@dataclass(frozen=True)
class RunnerShape:
    """The runner a flow run got, and the settings slices its tasks are given because of it."""

    name: str  # "local" or "dask"
    workers: int
    pages_per_task: float

    @classmethod
    def of_this_flow_run(cls, settings: MabillonSettings) -> "RunnerShape":
        runner = FlowRunContext.get().task_runner if FlowRunContext.get() else None
        client = getattr(runner, "client", None) if settings.runner == "dask" else None
        if client is not None:  # the cluster is up: count the workers it really has
            return cls("dask", max(1, len(client.nthreads())), settings.dask.pages_per_task)
        return cls("local", max(1, settings.ocr.workers), 1.0)

    def fan_out(self) -> FanOut:
        return FanOut(workers=self.workers, pages_per_task=self.pages_per_task)

    def parsing(self, settings: MabillonSettings) -> ParseSettings:
        # one page at a time per task: the runner's threads or processes are the parallelism
        return settings.parsing.model_copy(update={"ocr": settings.ocr.model_copy(update={"workers": 1})})

    def embedding(self, settings: MabillonSettings) -> EmbeddingSettings:
        if self.name == "dask" and settings.embedding.threads is None:
            return settings.embedding.model_copy(update={"threads": 1})
        return settings.embedding
