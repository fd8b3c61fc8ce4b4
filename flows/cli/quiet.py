"""A quiet terminal: what the libraries log stays off unless asked for (-v, --debug).

Prefect, transformers, Great Expectations and Lance each print to stderr on their own (banners,
INFO lines, a "Loading weights" bar, Rust WARN lines). Their switches are environment variables
read when they are first imported, so `quiet_environment` runs before any of them is. Our own
warnings (a quarantined file, a command waiting for the release slot) are still shown, one line
each; the result of a command is what it prints on stdout.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

OUR_LOGGERS = ("flows", "tasks", "schemas")
PROGRESS_LOGGER = "tasks.progress"  # "parse: 12/40 pages" on stderr while a long stage runs

# Applied with setdefault: a value the user exported wins.
OFFLINE_ENV = {  # models and analytics stay local: no hub lookups, no usage pings
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "GX_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
    # Without PREFECT_API_URL a command starts Prefect's local API; on a busy machine that takes
    # longer than Prefect's default 20 s wait, and the command would fail before doing anything.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
}
QUIET_ENV = {  # no progress bars, banners or notices of their own (undone by -v / --debug)
    "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1", "LANCE_LOG": "error", "LANCEDB_LOG": "error",
    # Prefect's console handler (banners, run logs) goes quiet; its loggers keep their level,
    # so the runs of a command still send their logs to a Prefect server's UI.
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "CRITICAL",
}
_set_here: set[str] = set()


def quiet_environment() -> None:
    for key, value in {**OFFLINE_ENV, **QUIET_ENV}.items():
        if key not in os.environ:
            os.environ[key] = value
            _set_here.add(key)


class AboveTheBar(logging.StreamHandler):
    """Writes each line above a progress bar in flight instead of through it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)


class OneLine(logging.Formatter):
    """`mabillon: <message>` for warnings; the level named for errors."""

    def format(self, record: logging.LogRecord) -> str:
        prefix = "mabillon: " if record.levelno < logging.ERROR else "mabillon: error: "
        return prefix + record.getMessage()


@contextlib.contextmanager
def configured_output(verbose: bool = False, debug: bool = False,
                      progress: bool = True) -> Iterator[None]:
    """`configure_output` for the duration of one command; the logging set-up is restored after
    (`main` may run several times in one process, as in the tests)."""
    names = [*OUR_LOGGERS, PROGRESS_LOGGER, ""]
    saved = [(logging.getLogger(n), logging.getLogger(n).handlers[:], logging.getLogger(n).level,
              logging.getLogger(n).propagate) for n in names]
    configure_output(verbose, debug, progress)
    try:
        yield
    finally:
        for logger, handlers, level, propagate in saved:
            logger.handlers[:], logger.propagate = handlers, propagate
            logger.setLevel(level)


def configure_output(verbose: bool = False, debug: bool = False, progress: bool = True) -> None:
    """Our loggers print warnings as single lines (INFO with -v, DEBUG with --debug), and the
    progress of long stages unless `progress` is off (--json: stdout is one document, stderr
    says nothing unless something is wrong); every other logger is silent unless -v or --debug."""
    if verbose or debug:
        for key in QUIET_ENV.keys() & _set_here:
            del os.environ[key]
    if debug:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "DEBUG")
    handler = AboveTheBar(sys.stderr)
    handler.setFormatter(OneLine() if not debug else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    ours = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    for name in OUR_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(ours)
        logger.propagate = False  # Prefect replaces the root handlers when it is imported
    logging.getLogger(PROGRESS_LOGGER).setLevel(logging.INFO if progress else logging.WARNING)
    root = logging.getLogger()
    if verbose or debug:
        root.setLevel(logging.DEBUG if debug else logging.INFO)
        if not root.handlers:
            root.addHandler(logging.StreamHandler(sys.stderr))
    else:
        root.setLevel(logging.CRITICAL)
        root.handlers[:] = [logging.NullHandler()]  # no "last resort" printing either
