"""The armed crash point (tasks/ingest/crash_points.py) carried to a run's Dask workers: a worker
plugin, so a worker that joins the cluster or is restarted later is armed as well. A module of
its own: it imports distributed, which a local run never needs."""
from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

from tasks.ingest import crash_points


class ArmWorkers(WorkerPlugin):
    name = "mabillon-crash-point"  # registered again, it replaces the one before

    def __init__(self, point: str | None):
        self.point = point

    def setup(self, worker) -> None:
        crash_points.arm(self.point)
