"""What a Dask cluster that Mabillon starts costs while it waits: the CPU seconds a minute of an
idle LocalCluster (its scheduler and nannies in this process, its worker processes), with
Dask's dashboard monitoring as distributed ships it and with flows/runner.py's QUIET_CLUSTER.

    .venv/bin/python bench/bench_dask_idle.py [--workers 2] [--idle-s 60]

Both clusters are measured in the same run, one after the other, each from `local_cluster_options`
(for the first, the Dask configuration it changes is put back as it was before); the figure is the
CPU of this process and its children over `--idle-s` seconds, after 10 s to settle.
Results: JSON on stdout and bench/results/dask_idle.json; copy the figures into docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import save_report  # noqa: E402


def cpu_s(process: psutil.Process) -> float:
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:  # a child gone between listing and reading
            continue
        total += t.user + t.system
    return total


def idle_cost(workers: int, idle_s: float, quiet: bool) -> dict:
    import dask
    from distributed import Client, LocalCluster

    from flows import runner
    from schemas.settings import DaskSettings

    shipped = copy.deepcopy(dask.config.config)
    options = runner.local_cluster_options(DaskSettings(workers=workers))  # sets QUIET_CLUSTER
    if not quiet:  # the configuration as it was: distributed's own monitoring
        dask.config.config.clear()
        dask.config.config.update(shipped)
    me = psutil.Process()
    with LocalCluster(**options) as cluster, Client(cluster) as client:
        client.wait_for_workers(workers, timeout=120)
        time.sleep(10)
        start = cpu_s(me)
        time.sleep(idle_s)
        spent = cpu_s(me) - start
    return {"quiet": quiet, "cpu_s_per_minute": round(spent * 60 / idle_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--idle-s", type=float, default=60)
    args = parser.parse_args()
    shipped = idle_cost(args.workers, args.idle_s, quiet=False)
    quiet = idle_cost(args.workers, args.idle_s, quiet=True)
    save_report("dask_idle", {"workers": args.workers, "idle_s": args.idle_s, "shipped": shipped,
                              "quiet": quiet,
                              "ratio": round(quiet["cpu_s_per_minute"] / shipped["cpu_s_per_minute"], 2)})


if __name__ == "__main__":
    main()
