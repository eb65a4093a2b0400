"""SIGTERM stops a service even when it arrives while the main thread holds a lock.

The hang this replaces: a handler calling ``threading.Event.set()`` while the interrupted
main thread held that event's lock (``Event.wait`` takes it again after each timed wait).
Each case runs in a subprocess with a deadline, so a hang fails the test instead of the run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# The main thread holds a lock exactly as Event.wait does between two timed waits, and the
# signal arrives then: Python runs the handler at the next bytecode, with the lock held.
SIGNAL_WHILE_LOCKED = """
import os, signal, threading
{setup}
held = {lock}
with held:
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(10):  # a few bytecodes: the handler has run by now
        pass
{check}
print("stopped", flush=True)
"""


def _run(script: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_an_event_set_from_the_handler_hangs_while_the_main_thread_holds_its_lock() -> None:
    """The hazard itself (why StopSignals exists): this is what the services did."""
    script = SIGNAL_WHILE_LOCKED.format(
        setup="done = threading.Event()\n"
        "signal.signal(signal.SIGTERM, lambda signum, frame: done.set())",
        lock="done._cond",
        check="assert done.is_set()",
    )
    with pytest.raises(subprocess.TimeoutExpired):
        _run(script, timeout=5)


# Every lock StopSignals holds (an Event's included), all held at once, or a plain lock if
# it has none: a handler that needed one of them would hang here.
HOLD_ITS_LOCKS = """
import contextlib
def hold_locks_of(obj):
    stack = contextlib.ExitStack()
    found = [v._cond if isinstance(v, threading.Event) else v
             for v in vars(obj).values()
             if isinstance(v, threading.Event) or hasattr(v, "acquire")]
    for lock in found or [threading.Lock()]:
        stack.enter_context(lock)
    return stack
"""


def test_stop_signals_notices_a_signal_that_arrives_while_its_locks_are_held() -> None:
    script = SIGNAL_WHILE_LOCKED.format(
        setup="from episodic.serving.stop_signals import StopSignals\n"
        "stop = StopSignals().install()\n" + HOLD_ITS_LOCKS,
        lock="hold_locks_of(stop)",
        check="assert stop.wait(5) and stop.signum == signal.SIGTERM",
    )
    done = _run(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped"


def test_wait_times_out_without_a_signal_and_set_stops_it() -> None:
    from episodic.serving.stop_signals import REQUESTED, StopSignals

    stop = StopSignals()
    assert not stop.wait(0.01) and not stop.is_set() and stop.signum is None
    stop.set()
    assert stop.wait(0.01) and stop.is_set() and stop.signum == REQUESTED
