"""`mabillon serve` stops on SIGTERM even when the runner absorbs the first interrupt."""
import os
import signal
import time

import pytest

from flows.cli.serve import StopOnSignal


@pytest.fixture
def stop():
    handler = StopOnSignal(repeat_s=0.2)
    previous = signal.signal(signal.SIGTERM, handler)
    yield handler
    handler.serving = False
    signal.signal(signal.SIGTERM, previous)


def serve_swallowing_the_first_interrupt(deadline_s: float) -> int:
    """Like a runner caught while starting: one KeyboardInterrupt is absorbed, then it serves on."""
    swallowed = 0
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if swallowed == 0:
                os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
        except KeyboardInterrupt:
            swallowed += 1
            if swallowed >= 2:
                raise
    return swallowed


def test_sigterm_is_repeated_until_serving_has_ended(stop):
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        serve_swallowing_the_first_interrupt(deadline_s=10)
    assert time.monotonic() - started < 2  # the repeat came after 0.2 s, not at the deadline


def test_once_serving_has_ended_signals_no_longer_interrupt_the_cleanup(stop):
    stop.serving = False
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.5)  # no KeyboardInterrupt raised here, none repeated
