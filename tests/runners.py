"""The task runners the release-side tests run on: `local`, and `dask` on one shared cluster.

A LocalCluster costs seconds to start, so in-process tests share one per session (the same
worker processes the CLI would start, joined by address); tests that kill processes start
their own through the CLI, which owns its cluster.
"""
from __future__ import annotations

import pytest

from schemas.settings import DaskSettings

# The Dask variant starts a cluster (worker processes importing the parse and embedding stacks):
# an end-to-end test, run by `make test`, not by `make test-fast`.
RUNNERS = ["local", pytest.param("dask", marks=pytest.mark.slow)]


@pytest.fixture(scope="session")
def dask_cluster():
    from distributed import LocalCluster

    from flows.runner import local_cluster_options

    with LocalCluster(**local_cluster_options(DaskSettings(workers=2))) as cluster:
        yield cluster


@pytest.fixture(params=RUNNERS)
def runner(request) -> dict:
    """Settings overrides of one runner; a test taking it runs once on each."""
    if request.param == "local":
        return {"runner": "local"}
    cluster = request.getfixturevalue("dask_cluster")
    return {"runner": "dask", "dask": DaskSettings(address=cluster.scheduler_address)}
