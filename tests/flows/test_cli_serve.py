"""`mabillon serve` stops on SIGTERM even when the runner absorbs the first interrupt."""
import os
import signal

import pytest

from flows.cli.serve import StopOnSignal


@pytest.fixture
def stop():
    handler = StopOnSignal(repeat_s=0.2)
    previous = signal.signal(signal.SIGTERM, handler)
    yield handler
    handler.end()
    signal.signal(signal.SIGTERM, previous)


def serve_swallowing_the_first_interrupt(stop: StopOnSignal) -> int:
    """Like a runner caught while starting: the first KeyboardInterrupt is absorbed and it
    serves on (at most 1,000 polls of 10 ms: a guard, not a measure); ending serving on the way
    out, as `mabillon serve` does. Returns how many interrupts reached it."""
    interrupts = 0
    try:
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler raises at the next bytecode
        except KeyboardInterrupt:
            interrupts += 1
        for _ in range(1000):
            stop.repeater.join(0.01)  # a repeated interrupt is raised when the join returns
    except KeyboardInterrupt:
        interrupts += 1
    finally:
        stop.end()
    return interrupts


def test_sigterm_is_repeated_until_serving_has_ended(stop):
    assert serve_swallowing_the_first_interrupt(stop) == 2
    assert stop.repeats >= 1  # the second interrupt was the repeat, not a second signal


def test_the_interrupt_is_repeated_while_serving_and_not_once_it_has_ended():
    calls = []

    def interrupt():
        calls.append(stop.serving)
        if len(calls) == 3:
            stop.end()

    stop = StopOnSignal(repeat_s=0, interrupt=interrupt)
    with pytest.raises(KeyboardInterrupt):
        stop(signal.SIGTERM, None)
    stop.repeater.join(timeout=10)
    assert not stop.repeater.is_alive()
    assert calls == [True, True, True] and stop.repeats == 3


def test_a_second_signal_arms_no_second_repeat_and_ending_stops_the_repeat_at_once():
    calls = []
    stop = StopOnSignal(repeat_s=3600, interrupt=lambda: calls.append(1))
    with pytest.raises(KeyboardInterrupt):
        stop(signal.SIGTERM, None)
    first = stop.repeater
    with pytest.raises(KeyboardInterrupt):
        stop(signal.SIGTERM, None)
    assert stop.repeater is first
    stop.end()
    stop.repeater.join(timeout=10)  # not the hour of repeat_s: ending wakes it
    assert not stop.repeater.is_alive() and calls == []


def test_once_serving_has_ended_signals_no_longer_interrupt_the_cleanup(stop):
    stop.end()
    try:
        signal.raise_signal(signal.SIGTERM)
        assert stop(signal.SIGTERM, None) is None
    except KeyboardInterrupt:  # failed here, rather than ending the test session
        pytest.fail("a signal after serving had ended interrupted the cleanup")
    assert stop.repeater is None and stop.repeats == 0  # and nothing armed to repeat it
