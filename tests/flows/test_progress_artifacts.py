"""A stage's progress artifact: there for a stage long enough to be watched, at 100 % when it is
over; none for a stage over within ARTIFACT_AFTER_S (each would cost the Prefect server a create,
its updates and their events, for a bar nobody sees)."""
from __future__ import annotations

import asyncio

from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterType
from prefect.context import get_run_context

from tasks import progress
from tasks.progress import ARTIFACT_AFTER_S, StageProgress


def progress_artifacts(flow_run_id) -> list:
    async def read():
        async with get_client() as client:
            return await client.read_artifacts(artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
                type=ArtifactFilterType(any_=["progress"])))
    return asyncio.run(read())


def test_only_a_stage_that_lasts_gets_a_progress_artifact_and_it_ends_full(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(progress, "clock", lambda: now[0])

    @flow
    def stages():
        with StageProgress("quick", 3, "page") as p:
            for _ in range(3):
                now[0] += ARTIFACT_AFTER_S / 4  # the whole stage within the window
                p.advance()
        with StageProgress("long", 4, "chunk") as p:
            for _ in range(4):
                now[0] += ARTIFACT_AFTER_S  # each item takes as long as the window
                p.advance()
        with StageProgress("left-early", 5, "chunk") as p:  # ends before its last item is counted
            now[0] += 3 * ARTIFACT_AFTER_S
            p.advance(2)
        return get_run_context().flow_run.id

    artifacts = progress_artifacts(stages())
    assert sorted((a.description, a.data) for a in artifacts) == [("left-early: 5/5", 100.0),
                                                                   ("long: 4/4", 100.0)]
