"""The door of every service: an asyncio gRPC server whose handlers run in a thread pool
only once their request has fully arrived.

Why not grpcio's threaded server: it reads a call's request inside a handler thread, so a
client that sends a call's headers and never its body holds a thread for as long as it
likes — 16 such calls (``EPISODIC_GRPC_WORKERS``) took a service down (issue 49). Here the
event loop receives requests (a waiting call costs a coroutine, not a thread), and:

- a call whose request has not arrived within ``EPISODIC_REQUEST_BODY_TIMEOUT`` is ended
  (DEADLINE_EXCEEDED, reason ``REQUEST_TIMEOUT``);
- each peer address may have at most ``EPISODIC_MAX_CALLS_PER_PEER`` calls open at once
  (waiting for their request, queued or running), and the server at most
  ``EPISODIC_MAX_CALLS_IN_FLIGHT`` calls queued or running in its handler threads; over
  either, RESOURCE_EXHAUSTED with a RetryInfo (reason ``SERVER_BUSY``);
- connections are capped by gRPC itself (``EPISODIC_MAX_CONNECTIONS``, refused before the
  handshake), and idle ones are closed;
- health checks are answered on the loop, never queued behind data-path calls — and
  they tell the truth about the data path: when every handler thread is busy and none has
  finished a call for ``EPISODIC_HANDLERS_STALL_AFTER``, the replica is not serving
  (:meth:`Admission.handlers_stalled_for`), and readiness says so.

The servicers stay synchronous (they talk to PostgreSQL through SQLAlchemy): the handlers
are plain functions, called in the pool with a :class:`CallContext`. Everything on the
loop here is bookkeeping of a few microseconds.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from episodic.errors import DeadlineExceeded, ResourceExhausted

__all__ = ["Admission", "AdmissionLimits", "CallContext", "EventLoopThread"]

T = TypeVar("T")

#: How long a refused caller is asked to wait before trying again (at least; jittered up
#: to three times that, so refused callers do not come back in step).
BUSY_RETRY_AFTER = 0.1


class EventLoopThread:
    """An asyncio loop running in a daemon thread of its own: the gRPC server lives there,
    while the process's main thread keeps its signal handling and the handlers run in
    their pool. :meth:`run` calls a coroutine on it from any other thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def running(self) -> bool:
        return self.loop.is_running()

    def run(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        if threading.current_thread() is self._thread:
            raise RuntimeError("EventLoopThread.run called from its own loop: it would deadlock")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


@dataclass(frozen=True)
class AdmissionLimits:
    """The door's caps (0: no cap). See :mod:`episodic.serving.transport` for what each bounds."""

    request_timeout: float = 10.0
    max_calls_per_peer: int = 64
    max_calls_in_flight: int = 256
    handlers_stall_after: float = 60.0


class Admission:
    """Counts open calls per peer and calls handed to the handler pool, and refuses those
    over the caps. Used on the event loop only, so it needs no lock."""

    def __init__(self, limits: AdmissionLimits, handlers: int = 0) -> None:
        self.limits = limits
        self.per_peer: Counter[str] = Counter()
        self.in_flight = 0
        #: The handler threads (0: unknown, never stalled). With at least this many calls
        #: in flight every thread is busy, and the pool moves only when one finishes.
        self.handlers = handlers
        #: When the pool last moved: a call finished, or one started on a free thread.
        self.last_progress = time.monotonic()

    def open(self, peer: str) -> None:
        """A call from ``peer`` begins (before its request has arrived); raises
        ResourceExhausted when the peer already has its cap of calls open."""
        cap = self.limits.max_calls_per_peer
        if cap and self.per_peer[peer] >= cap:
            raise _busy(
                f"this client address ({peer}) already has {cap} calls open on this replica "
                "(EPISODIC_MAX_CALLS_PER_PEER)"
            )
        self.per_peer[peer] += 1

    def close(self, peer: str) -> None:
        left = self.per_peer[peer] - 1
        if left > 0:
            self.per_peer[peer] = left
        else:
            del self.per_peer[peer]

    def dispatch(self) -> None:
        """A call's request arrived and it is about to be queued for a handler thread;
        raises ResourceExhausted when the handlers already have their cap of calls."""
        cap = self.limits.max_calls_in_flight
        if cap and self.in_flight >= cap:
            raise _busy(
                f"this replica already has {cap} calls queued or running "
                "(EPISODIC_MAX_CALLS_IN_FLIGHT)"
            )
        if self.in_flight < self.handlers:
            self.last_progress = time.monotonic()
        self.in_flight += 1

    def finished(self) -> None:
        """A dispatched call's handler returned (not merely its caller gone: the thread
        was busy until now)."""
        self.in_flight -= 1
        self.last_progress = time.monotonic()

    def handlers_stalled(self) -> bool:
        """Whether the handler pool has been stalled longer than its bound."""
        after = self.limits.handlers_stall_after
        return bool(after) and self.handlers_stalled_for() > after

    def handlers_stalled_for(self) -> float:
        """Seconds every handler thread has been busy without any of them finishing a call
        (0 while one is free or calls finish). A long stall means calls hang on something
        no bound covers: the replica answers health, but serves nothing. Read from any
        thread: two plain reads, at worst one check late."""
        if not self.handlers or self.in_flight < self.handlers:
            return 0.0
        return max(0.0, time.monotonic() - self.last_progress)


def _busy(what: str) -> ResourceExhausted:
    wait = BUSY_RETRY_AFTER * random.uniform(1.0, 3.0)
    return ResourceExhausted(
        f"{what}; retry in {wait:.2f} s", retry_after=wait, reason="SERVER_BUSY"
    )


def request_timed_out(seconds: float) -> DeadlineExceeded:
    return DeadlineExceeded(
        f"the request did not arrive within {seconds:g} s of the call's start "
        "(EPISODIC_REQUEST_BODY_TIMEOUT); send the call's message with its headers",
        reason="REQUEST_TIMEOUT",
    )


async def read_request(context: Any, timeout: float) -> Any:
    """The call's one request message, or raises :func:`request_timed_out` when it has not
    arrived in ``timeout`` seconds (0: wait as long as the client's deadline). The read is
    left to finish on its own: cancelling a receive inside gRPC's core is not supported."""
    read = asyncio.ensure_future(context.read())
    done, _ = await asyncio.wait({read}, timeout=timeout or None)
    if not done:
        # Retrieve whatever it ends with, so asyncio does not log it as never retrieved.
        read.add_done_callback(lambda task: task.cancelled() or task.exception())
        raise request_timed_out(timeout)
    return read.result()


class CallContext:
    """What a handler may ask of its call, from its handler thread: the deadline, the
    metadata and the peer (the subset of grpc.ServicerContext the servicers use). Status
    codes are not set here: handlers raise :class:`~episodic.errors.EpisodicError`."""

    __slots__ = ("_deadline", "_metadata", "_peer")

    def __init__(
        self,
        metadata: Sequence[tuple[str, str | bytes]] = (),
        peer: str = "",
        time_remaining: float | None = None,
    ) -> None:
        self._metadata = tuple(metadata)
        self._peer = peer
        self._deadline = None if time_remaining is None else time.monotonic() + time_remaining

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(self._deadline - time.monotonic(), 0.0)

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._metadata

    def peer(self) -> str:
        return self._peer
