"""Waiting for SIGTERM / SIGINT with a signal handler that takes no lock.

A Python signal handler runs in the main thread between two bytecodes, possibly while that
thread holds a lock. The obvious ``threading.Event`` does exactly that: ``Event.wait(0.5)``
takes the event's internal (non-reentrant) lock again each time a timed wait ends, and a
handler that then calls ``Event.set()`` waits for a lock its own thread holds. The process
hangs on SIGTERM until it is killed, its claims and leases never handed back. The suite saw
it once: a Scheduler that logged "received signal 15" from such a handler and never
"shutting down". (Logging or printing from a handler has the same hazard with the
handler's and the stream's locks.)

:class:`StopSignals` records the signal in a list (an append takes no lock) and the main
thread polls it in short sleeps, which the signal interrupts; everything else — logging,
shutting down — happens after :meth:`StopSignals.wait` returns, in ordinary code.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterable

#: How often :meth:`StopSignals.wait` looks at the flag (seconds): a stop is noticed at
#: most this long after its signal.
POLL = 0.05

#: What a stop requested by code (not by a signal) records as its signal number.
REQUESTED = 0


class StopSignals:
    """SIGTERM and SIGINT (or the given signals) as a flag the main thread waits on.

    ``is_set`` / ``wait`` / ``set`` read like a ``threading.Event``'s, but only the main
    thread should wait (a signal interrupts only its sleep)."""

    def __init__(self) -> None:
        self._received: list[int] = []

    def install(self, signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT)) -> StopSignals:
        """Routes ``signals`` here (from the main thread, as ``signal.signal`` requires)."""
        for signum in signals:
            signal.signal(signum, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._received.append(signum)  # nothing else: see the module docstring

    def set(self) -> None:
        """A stop asked for by code (a failed start, a test)."""
        self._received.append(REQUESTED)

    def is_set(self) -> bool:
        return bool(self._received)

    @property
    def signum(self) -> int | None:
        """The first signal received (``REQUESTED`` for :meth:`set`), or None."""
        return self._received[0] if self._received else None

    def wait(self, timeout: float | None = None) -> bool:
        """Sleeps until a stop arrives (True) or ``timeout`` seconds pass (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._received:
            step = POLL
            if deadline is not None:
                step = min(step, deadline - time.monotonic())
                if step <= 0:
                    return False
            time.sleep(step)
        return True
