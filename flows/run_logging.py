"""What a run's log shows in the Prefect UI: its messages, without tracebacks or server paths.

Prefect sends a run's log records to the API, where anyone who can open the UI reads them. A
traceback there names the server's files and the installation; an exception's text may name the
state root. `RedactedAPILogHandler` replaces Prefect's API handler in the runs `mabillon serve`
executes (PREFECT_LOGGING_HANDLERS_API_CLASS): the message goes to the UI without the traceback
and with absolute paths replaced, while the serving process's own console log keeps everything
for the operator.
"""
from __future__ import annotations

import copy
import logging
import re

from prefect.logging.handlers import APILogHandler

HANDLER_ENV = {"PREFECT_LOGGING_HANDLERS_API_CLASS": "flows.run_logging.RedactedAPILogHandler"}
# An absolute path of two or more segments (with a file:// scheme or not)
_PATH = re.compile(r"(?:file://)?(?<![\w.:/])/(?:[\w.@+~-]+/)+[\w.@+~-]*")
HIDDEN = "<server path>"


def redact(text: str) -> str:
    return _PATH.sub(HIDDEN, text)


class RedactedAPILogHandler(APILogHandler):
    def format(self, record: logging.LogRecord) -> str:
        plain = copy.copy(record)
        plain.exc_info, plain.exc_text, plain.stack_info = None, None, None
        message = super().format(plain)
        if record.exc_info and record.exc_info[1] is not None:
            message += " (details in the serve log)"
        return redact(message)
