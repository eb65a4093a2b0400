"""Background loops that say when they are stuck.

A service's background loops (the Scheduler's timer firing, its reclaim and maintenance
sweeps, the Summariser's worker) run *passes*. Every wait inside a pass has a bound of its
own — ``lock_timeout``, ``statement_timeout``, PostgreSQL ending a session idle inside a
transaction, ``SKIP LOCKED`` where a row may be held — so a pass that has still not
finished after its loop's ``stall_after`` is waiting on something no bound covers. That must
show, not be silence: :func:`stalls` lists such loops, the process's health monitor
(:mod:`episodic.serving.server`) reports each loop under its own health name
(``episodic.loop.<name>``) and takes the service out of readiness while one of them is
stalled, the ``episodic.loop.pass.age`` gauge reports how long each loop's current pass has
run, and the first sight of a stall logs the loop, how long and the step it is in.

Usage, in the loop's thread::

    watch = loops.watch("scheduler.timers", stall_after=120.0)
    with watch.running():
        loops.step("claim_due_timers")   # where the pass is, for the stall report
        ...
        loops.step("statistics", within=1860.0)  # a step bounded by a ceiling of its own

A step whose own bound is longer than the loop's (a large dataset's statistics count, under
a 30-minute statement ceiling) says so with ``within``: the pass is stalled only once it has
outrun that bound too.

:func:`step` names the step of whichever pass the calling thread runs (a no-op outside
one), so domain code marks its steps without knowing which loop runs it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_local = threading.local()
_registry_lock = threading.Lock()
_registry: dict[str, LoopWatch] = {}


@dataclass(frozen=True)
class Stall:
    """A loop whose current pass has run longer than its bound."""

    loop: str
    seconds: float  # how long the pass has run
    step: str  # the step it is in (the last :func:`step` of the pass)

    def __str__(self) -> str:
        return f"loop {self.loop} has run one pass for {self.seconds:.0f}s, in step {self.step}"


class LoopWatch:
    """The state of one loop's current pass: when it started and the step it is in."""

    def __init__(self, name: str, stall_after: float) -> None:
        self.name = name
        self.stall_after = stall_after
        self._lock = threading.Lock()
        self._started: float | None = None
        self._step = "starting"
        # a step with a bound of its own longer than stall_after (step(within=...)):
        # when it began, and for how long it may run
        self._step_started = 0.0
        self._step_within: float | None = None

    @contextmanager
    def running(self) -> Iterator[LoopWatch]:
        """One pass: from here until the block ends, the loop is busy."""
        previous = getattr(_local, "watch", None)
        with self._lock:
            self._started = time.monotonic()
            self._step = "starting"
            self._step_within = None
        _local.watch = self
        try:
            yield self
        finally:
            _local.watch = previous
            with self._lock:
                self._started = None
                self._step = "idle"

    def set_step(self, name: str, within: float | None = None) -> None:
        with self._lock:
            self._step = name
            self._step_started = time.monotonic()
            self._step_within = within

    def pass_age(self) -> float:
        """Seconds the current pass has run; 0 between passes."""
        with self._lock:
            return 0.0 if self._started is None else time.monotonic() - self._started

    def stall(self) -> Stall | None:
        """The stall, if the current pass has run longer than ``stall_after``."""
        with self._lock:
            if self._started is None:
                return None
            now = time.monotonic()
            age = now - self._started
            step = self._step
            bound = self.stall_after
            if self._step_within is not None:  # the step may run as long as its own bound
                bound = max(bound, self._step_started + self._step_within - self._started)
        return Stall(self.name, age, step) if age > bound else None


def watch(name: str, stall_after: float) -> LoopWatch:
    """The watch of loop ``name`` in this process (created on first use; a later call with
    the same name returns the same watch, with the new bound)."""
    with _registry_lock:
        existing = _registry.get(name)
        if existing is None:
            existing = _registry[name] = LoopWatch(name, stall_after)
        existing.stall_after = stall_after
        return existing


def watches() -> list[LoopWatch]:
    """Every loop watched in this process, by name."""
    with _registry_lock:
        return [_registry[name] for name in sorted(_registry)]


def stalls() -> list[Stall]:
    """The loops of this process that are stalled now."""
    return [s for s in (w.stall() for w in watches()) if s is not None]


def step(name: str, within: float | None = None) -> None:
    """Names the step the calling thread's pass is in (no-op outside a pass). ``within``:
    the seconds the step may take by a bound of its own longer than the loop's
    ``stall_after`` (a statement ceiling set for it, say): the pass is stalled only once
    the step has outrun that bound too."""
    current: LoopWatch | None = getattr(_local, "watch", None)
    if current is not None:
        current.set_step(name, within)


def forget(name: str) -> None:
    """Drops loop ``name`` (a stopped component; tests)."""
    with _registry_lock:
        _registry.pop(name, None)


@contextmanager
def beating(name: str, interval: float, beat: Callable[[], bool | None]) -> Iterator[None]:
    """Calls ``beat`` every ``interval`` seconds in a thread of its own (named ``name``)
    while the block runs: a heartbeat that keeps claims or a lease while long work goes
    on. ``beat`` returning False ends the beats early (what it kept is lost); what it
    raises is the beat's to handle (a beat that raises ends them too). The block's end
    waits for a beat in progress."""
    finished = threading.Event()

    def run() -> None:
        while not finished.wait(interval):
            if beat() is False:
                return

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        finished.set()
        thread.join()
