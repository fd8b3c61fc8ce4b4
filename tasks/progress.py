"""Progress of long stages: on a terminal a bar, elsewhere a line now and then (logged), and
inside a flow run a Prefect artifact.

Whether a person is watching is the caller's to say, through this module's logger: the CLI
enables it at INFO (`mabillon ingest` shows "parse: 12/40 pages" on stderr) and leaves it off
with --json; a library caller that enables nothing sees nothing."""
from __future__ import annotations

import logging
import sys
import time

REPORT_EVERY_S = 2.0  # seconds between two progress lines of one stage (the last one always comes)

from tqdm import tqdm

log = logging.getLogger(__name__)


class StageProgress:
    """`with StageProgress("embed", total) as p: p.advance(n)` — cheap to call per item."""

    def __init__(self, stage: str, total: int, unit: str = "it", show_bar: bool | None = None):
        self.stage, self.total, self.done, self.unit = stage, total, 0, unit
        watched = log.isEnabledFor(logging.INFO) and total > 0
        show = (sys.stderr.isatty() if show_bar is None else show_bar) and watched
        self._lines = watched and not show  # no terminal to draw a bar on: a line now and then
        self._bar = tqdm(total=total, desc=stage, unit=unit, disable=not show,
                         file=sys.stderr, leave=False, dynamic_ncols=True)
        self._artifact_id = None
        self._last_update = 0.0
        self._last_line = time.monotonic()

    def __enter__(self) -> "StageProgress":
        try:
            from prefect.artifacts import create_progress_artifact
            from prefect.context import TaskRunContext, FlowRunContext

            if (TaskRunContext.get() or FlowRunContext.get()) and self.total:
                self._artifact_id = create_progress_artifact(
                    progress=0.0, description=f"{self.stage}: 0/{self.total}")
        except Exception as exc:  # progress must never break a release
            log.debug("no progress artifact: %s", exc)
        return self

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._bar.update(n)
        now = time.monotonic()
        if self._lines and (now - self._last_line >= REPORT_EVERY_S or self.done >= self.total):
            self._last_line = now
            log.info("%s: %d/%d %s%s", self.stage, min(self.done, self.total), self.total, self.unit,
                     "" if self.total == 1 else "s")
        if self._artifact_id is not None and (now - self._last_update > 2 or self.done >= self.total):
            self._last_update = now
            try:
                from prefect.artifacts import update_progress_artifact

                update_progress_artifact(self._artifact_id, progress=100.0 * self.done / self.total,
                                         description=f"{self.stage}: {self.done}/{self.total}")
            except Exception as exc:
                log.debug("progress update failed: %s", exc)

    def __exit__(self, *exc) -> None:
        self._bar.close()
        if self._artifact_id is not None and self.done < self.total and exc[0] is None:
            self.done = self.total - 1
            self.advance(1)
