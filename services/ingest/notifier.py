"""Ingest's calls to the Scheduler.

Activity notices are coalesced per thread and sent from a background thread, so a burst of
messages costs the Scheduler one call and a slow or absent Scheduler never slows a write.
The thread waits a linger (``EPISODIC_SCHEDULER_NOTIFY_LINGER``, 100 ms) after the first
notice before sending what has gathered: without it, a client writing one message at a
time woke the thread and sent one RecordActivity (a gRPC call here, a transaction in the
Scheduler) per AddMessages, on the same two cores as the write.
Nothing depends on these notices for correctness: the Scheduler's catch-up sweep finds any
thread with uncaptured messages and no timer, so a lost notice only delays an episode.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

import grpc
from opentelemetry import context as otel_context

from episodic.v1 import scheduler_service_pb2 as pb
from episodic.v1 import scheduler_service_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)


# Beyond this many distinct pending notices (a hung Scheduler) the oldest are dropped: a
# very late notice would only push a timer out needlessly, and the catch-up sweep covers
# every thread whose notice never arrived.
MAX_PENDING = 10_000


class SchedulerNotifier:
    def __init__(
        self,
        channel: grpc.Channel,
        timeout: float,
        *,
        linger: float,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """``linger``: how long the first pending notice waits for others to join it (an
        activity notice only re-arms an idle timer due minutes later, so arriving this much
        later moves that deadline by as much, which no one can tell apart from a later
        message); ``metadata`` goes with every call (the services' own key)."""
        self._stub = pb_grpc.SchedulerServiceStub(channel)
        self._timeout = timeout
        self._metadata = metadata
        self._linger = linger
        self._closing = threading.Event()
        # thread_id -> (kind, OTel context of the write that caused it)
        self._pending: OrderedDict[tuple[str, str], otel_context.Context] = OrderedDict()
        self._cv = threading.Condition()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="scheduler-notifier", daemon=True)
        self.failures = 0
        self.dropped = 0
        self._worker.start()

    def record_activity(self, thread_id: str) -> None:
        self._enqueue("activity", thread_id)

    def record_thread_started(self, thread_id: str) -> None:
        self._enqueue("started", thread_id)

    def request_episode(self, thread_id: str, timeout: float) -> pb.RequestEpisodeResponse | None:
        """Synchronous: EndThread wants the answer. None when the Scheduler did not answer.
        The thread's pending notices go first, as they would have without the linger: an
        activity notice arriving after the request would re-arm an idle timer for messages
        the episode already captured."""
        with self._cv:
            mine = [
                (key, self._pending.pop(key))
                for key in [k for k in self._pending if k[1] == thread_id]
            ]
        for (kind, _), ctx in mine:
            self._send(kind, thread_id, ctx)
        try:
            return self._stub.RequestEpisode(
                pb.RequestEpisodeRequest(thread_id=thread_id),
                timeout=min(timeout, self._timeout),
                metadata=self._metadata,
            )
        except grpc.RpcError as err:
            self.failures += 1
            log.warning("scheduler RequestEpisode(%s) failed: %s", thread_id, err.code())
            return None

    def _enqueue(self, kind: str, thread_id: str) -> None:
        with self._cv:
            key = (kind, thread_id)
            was_empty = not self._pending
            self._pending.pop(key, None)
            self._pending[key] = otel_context.get_current()
            while len(self._pending) > MAX_PENDING:
                self._pending.popitem(last=False)
                self.dropped += 1
            if was_empty:  # the worker waits only on an empty queue
                self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._closed:
                    self._cv.wait()
                if not self._pending:
                    return
            if self._linger > 0:
                self._closing.wait(self._linger)  # close() sends what is queued at once
            with self._cv:
                batch = list(self._pending.items())
                self._pending.clear()
            for (kind, thread_id), ctx in batch:
                self._send(kind, thread_id, ctx)

    def _send(self, kind: str, thread_id: str, ctx: otel_context.Context) -> None:
        token = otel_context.attach(ctx)  # keep the write's trace across the hop
        try:
            if kind == "activity":
                self._stub.RecordActivity(
                    pb.RecordActivityRequest(thread_id=thread_id),
                    timeout=self._timeout,
                    metadata=self._metadata,
                )
            else:
                self._stub.RecordThreadStarted(
                    pb.RecordThreadStartedRequest(thread_id=thread_id),
                    timeout=self._timeout,
                    metadata=self._metadata,
                )
        except grpc.RpcError as err:
            self.failures += 1
            log.warning("scheduler %s(%s) failed: %s", kind, thread_id, err.code())
        finally:
            otel_context.detach(token)

    def close(self, timeout: float = 5.0) -> None:
        """Sends what is queued (bounded by ``timeout``), then stops the worker."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._closing.set()
        self._worker.join(timeout)
