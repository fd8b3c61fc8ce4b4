"""Progress of long stages: on a terminal a bar, elsewhere a line now and then (logged), and
inside a flow run a Prefect artifact once the stage has run long enough to be watched.

Whether a person is watching is the caller's to say, through this module's logger: the CLI
enables it at INFO (`mabillon ingest` shows "parse: 12/40 pages" on stderr) and leaves it off
with --json; a library caller that enables nothing sees nothing."""
from __future__ import annotations

import logging
import sys
import time

REPORT_EVERY_S = 2.0  # seconds between two progress lines of one stage (the last one always comes)
# A stage over before this has no progress artifact: nobody watches a bar fill in a second, and
# each artifact costs the Prefect server its create, its updates and their events (a small
# release's progress artifacts were most of its API calls). Its outcome is in the run's tables.
ARTIFACT_AFTER_S = 2.0
clock = time.monotonic  # a module seam: a test moves a stage's time on without waiting it out

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
        self._in_run = False
        self._started = self._last_update = self._last_line = clock()

    def __enter__(self) -> "StageProgress":
        try:
            from prefect.context import FlowRunContext, TaskRunContext

            self._in_run = bool((TaskRunContext.get() or FlowRunContext.get()) and self.total)
        except Exception as exc:  # progress must never break a release
            log.debug("no progress artifact: %s", exc)
        return self

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._bar.update(n)
        now = clock()
        if self._lines and (now - self._last_line >= REPORT_EVERY_S or self.done >= self.total):
            self._last_line = now
            log.info("%s: %d/%d %s%s", self.stage, min(self.done, self.total), self.total, self.unit,
                     "" if self.total == 1 else "s")
        if not self._in_run:
            return
        if self._artifact_id is None:
            if now - self._started >= ARTIFACT_AFTER_S:
                self._artifact_id = self._artifact("create_progress_artifact")
                self._last_update = now
        elif now - self._last_update >= REPORT_EVERY_S or self.done >= self.total:
            self._last_update = now
            self._artifact("update_progress_artifact", self._artifact_id)

    def _artifact(self, call: str, *args):
        """A progress artifact created or updated at done/total; None if Prefect refused it."""
        try:
            import prefect.artifacts

            return getattr(prefect.artifacts, call)(
                *args, progress=100.0 * min(self.done, self.total) / self.total,
                description=f"{self.stage}: {min(self.done, self.total)}/{self.total}")
        except Exception as exc:  # progress must never break a release
            log.debug("progress artifact: %s", exc)
            return None

    def __exit__(self, *exc) -> None:
        self._bar.close()
        if self._artifact_id is not None and self.done < self.total and exc[0] is None:
            self.done = self.total - 1
            self.advance(1)
