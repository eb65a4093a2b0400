"""The summariser's background loop: woken by NOTIFY from the Scheduler (and by a poll
interval as a fallback, since notifications are lost while disconnected)."""

from __future__ import annotations

import logging
import threading

import psycopg

from episodic import loops
from episodic.errors import describe_error, log_failure
from episodic.store.db import is_database_outage
from episodic.store.embedding_space import SPACE_LOCK
from episodic.store.episodes import CHANNELS

from .pipeline import Pipeline

log = logging.getLogger(__name__)


#: The worker loop's health and metric name (see episodic.loops).
WORKER_LOOP = "summariser.worker"


class Worker:
    def __init__(
        self,
        pipeline: Pipeline,
        dsn: str,
        poll_interval: float,
        batch_size: int,
        *,
        stall_after: float = 600.0,
    ) -> None:
        self.pipeline = pipeline
        self.dsn = dsn
        self.poll_interval = poll_interval
        self.batch_size = batch_size
        # A pass that runs longer than this shows as stalled in the health check.
        self.watch = loops.watch(WORKER_LOOP, stall_after)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="summariser-worker", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float) -> None:
        """Stops after the episode in hand (bounded by ``timeout``), then hands back claims."""
        self.stop_event.set()
        self.thread.join(timeout)
        released = self.pipeline.release()
        if released:
            log.info("released %d claims for other replicas", released)

    def _run(self) -> None:
        while not self.stop_event.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True) as listen:
                    for channel in CHANNELS:
                        listen.execute(f"LISTEN {channel}")
                    while not self.stop_event.is_set():
                        self._drain(listen)
                        # Wait for a notification or the poll interval, whichever is first.
                        for _ in listen.notifies(timeout=self.poll_interval, stop_after=1):
                            pass
            except Exception as err:
                if is_database_outage(err):  # psycopg's or SQLAlchemy's: a restart, a cut
                    log.warning("summariser lost the database: %s; retrying", describe_error(err))
                    self.stop_event.wait(min(5.0, self.poll_interval * 5))
                else:
                    log_failure(log, "summariser loop failed; restarting it", err)
                    self.stop_event.wait(1.0)

    def _drain(self, listen: psycopg.Connection) -> None:
        # Until a pass finds nothing to do: one that yielded its chunk index to a due
        # episode counts as work (the next pass claims the episode, then goes on).
        while not self.stop_event.is_set():
            # Each pass writes its vectors inside a re-embedding's fence: it holds the
            # space's lock shared, and a re-embedding takes it exclusively to record its
            # target model, so no pass that read the old target still writes after that
            # (store/embedding_space.py). On the listening connection: no pool slot.
            with self.watch.running():
                loops.step("embedding_space_lock")
                listen.execute("SELECT pg_advisory_lock_shared(%s)", (SPACE_LOCK,))
                try:
                    worked = self.pipeline.run_once(self.batch_size).did_work
                finally:
                    listen.execute("SELECT pg_advisory_unlock_shared(%s)", (SPACE_LOCK,))
            if not worked:
                return
