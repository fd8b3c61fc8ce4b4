"""Run the CLI with a stop inserted at one stage of a release, for the SIGKILL tests:
`python -m tests.hostile.crash_release STAGE CLI-ARGS...`. At the stop the process writes the
file named by $HOSTILE_MARKER and sleeps until it is killed. Test-only: the stage functions are
wrapped here, so the product carries no hook for them.

acquire  after three sources are stored     parse   after three pieces (documents or pages) are parsed
publish  after the LanceDB version and tag are written, before the Parquet lineage
after-switch  just after the routing record was switched to the new generation
"""
from __future__ import annotations

import os
import sys
import time


def stop() -> None:
    with open(os.environ["HOSTILE_MARKER"], "w") as fh:
        fh.write(str(os.getpid()))
    while True:
        time.sleep(1)


def after(calls: int, function):
    count = 0

    def wrapped(*args, **kwargs):
        nonlocal count
        result = function(*args, **kwargs)
        count += 1
        if count >= calls:
            stop()
        return result
    return wrapped


def before(function):
    def wrapped(*args, **kwargs):
        stop()
        return function(*args, **kwargs)
    return wrapped


def install(stage: str) -> None:
    from tasks.ingest import acquire, publish
    from tasks.ingest.parse import units

    if stage == "acquire":
        acquire.acquire_one = after(3, acquire.acquire_one)
    elif stage == "parse":
        units.read_piece = after(3, units.read_piece)  # the parse stage's one call into the sandbox
    elif stage == "publish":
        publish.write_lineage_snapshot = before(publish.write_lineage_snapshot)
    elif stage == "after-switch":
        publish.switch_routing = after(1, publish.switch_routing)
    else:
        raise SystemExit(f"unknown stage {stage}")


if __name__ == "__main__":
    install(sys.argv[1])
    from flows.cli.main import main

    sys.exit(main(sys.argv[2:]))
