"""Writing an import plan through the SDK: :class:`Importer` finds or creates each thread,
adds the messages it lacks in :func:`batches`, ends it and records its outcome; what it needs
of the client (:class:`Writer`), what it did (:class:`ImportStats`) and why it stopped
(:class:`ThreadImportError`, :class:`ImportInterrupted`). The guarantees (resumable, never a
duplicate) are described in :mod:`episodic.ops.backfill`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

from episodic.ops.backfill.plan import ImportMessage, ImportPlan, ImportThread, thread_key
from episodic.sdk.client import (
    AddMessagesResult,
    AlreadyExistsError,
    DeadlineExceededError,
    EndThreadResult,
    Message,
    NotFoundError,
    Page,
    Thread,
    UnavailableError,
)

DEFAULT_BATCH_SIZE = 100
#: Bytes of content per AddMessages call (Ingest refuses more than 4 MiB of content and
#: metadata; this leaves room for the metadata and the protobuf framing).
DEFAULT_BATCH_BYTES = 1_000_000


class ThreadImportError(Exception):
    """Writing one thread failed; ``__cause__`` is the service's error. Threads imported
    before it are stored; re-running the import resumes. ``stats`` (set by
    :meth:`Importer.run`): what was acknowledged before it stopped."""

    def __init__(self, thread: ImportThread, cause: Exception) -> None:
        super().__init__(
            f"thread {thread.source_id!r} of dataset {thread.dataset!r} (line "
            f"{thread.first_line}, id {thread.thread_id}): {cause}"
        )
        self.thread = thread
        self.stats: ImportStats | None = None


class ImportInterrupted(Exception):
    """:meth:`Importer.stop` was called: the import stopped between batches (the batches
    in flight finished), so ``stats`` says exactly what is stored."""

    def __init__(self, stats: ImportStats) -> None:
        super().__init__("interrupted")
        self.stats = stats


def batches(
    messages: Sequence[ImportMessage],
    size: int = DEFAULT_BATCH_SIZE,
    max_bytes: int = DEFAULT_BATCH_BYTES,
) -> list[list[ImportMessage]]:
    """Splits a thread's messages into AddMessages calls of at most ``size`` messages and
    about ``max_bytes`` of content and metadata (a single larger message goes alone)."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    out: list[list[ImportMessage]] = []
    current: list[ImportMessage] = []
    current_bytes = 0
    for message in messages:
        weight = len(message.content.encode()) + len(json.dumps(message.metadata))
        if current and (len(current) >= size or current_bytes + weight > max_bytes):
            out.append(current)
            current, current_bytes = [], 0
        current.append(message)
        current_bytes += weight
    if current:
        out.append(current)
    return out


class Writer(Protocol):
    """What the import needs of :class:`episodic.sdk.client.EpisodicClient`."""

    def create_thread(
        self,
        dataset: str,
        *,
        label: str = "",
        metadata: Mapping[str, Any] | None = None,
        thread_id: str | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> Thread: ...

    def get_thread(self, thread_id: str, *, timeout: float | None = None) -> Thread: ...

    def list_messages(
        self,
        thread_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        start_sequence: int = 0,
        end_sequence: int = 0,
        timeout: float | None = None,
    ) -> Page[Message]: ...

    def add_messages(
        self, thread_id: str, messages: Iterable[Any], *, timeout: float | None = None
    ) -> AddMessagesResult: ...

    def end_thread(self, thread_id: str, *, timeout: float | None = None) -> EndThreadResult: ...

    def record_outcome(
        self,
        thread_id: str,
        outcome: str,
        *,
        score: float | None = None,
        note: str = "",
        episode_id: str | None = None,
        timeout: float | None = None,
    ) -> Any: ...


@dataclass
class ImportStats:
    """What an import did. ``messages`` were acknowledged by Ingest: ``stored`` by this
    run, ``already_stored`` before it (skipped, or answered from their idempotency key)."""

    threads: int = 0
    threads_created: int = 0
    threads_existing: int = 0
    messages: int = 0
    stored: int = 0
    already_stored: int = 0
    threads_ended: int = 0
    episodes_queued: int = 0
    outcomes: int = 0  # outcomes recorded (format openai)
    #: Threads whose messages are all stored (and ended, and their outcome recorded).
    threads_complete: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        """Messages acknowledged per second."""
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """The final line: counts, time and rate."""
        return (
            f"imported {self.messages:,} messages in {self.threads:,} threads "
            f"({self.stored:,} new, {self.already_stored:,} already stored; "
            f"{self.threads_created:,} threads created) in {self.seconds:.1f} s: "
            f"{self.rate:,.0f} msg/s; {self.episodes_queued:,} episodes queued"
            + (f"; {self.outcomes:,} outcomes recorded" if self.outcomes else "")
        )

    def stop_report(self, plan: ImportPlan) -> str:
        """Where an import that did not finish stopped: what Ingest acknowledged, of what."""
        return (
            f"{self.messages:,} of {plan.message_count:,} messages acknowledged "
            f"({self.stored:,} new, {self.already_stored:,} already stored); "
            f"{self.threads_complete:,} of {len(plan.threads):,} threads complete"
        )

    def as_json(self) -> dict[str, Any]:
        """The counts as ``episodic import --json`` prints them."""
        return {
            "threads": self.threads,
            "threads_created": self.threads_created,
            "threads_complete": self.threads_complete,
            "messages": self.messages,
            "stored": self.stored,
            "already_stored": self.already_stored,
            "threads_ended": self.threads_ended,
            "episodes_queued": self.episodes_queued,
            "outcomes": self.outcomes,
            "seconds": round(self.seconds, 3),
            "messages_per_second": round(self.rate, 1),
        }


R = TypeVar("R")


def _retrying(fn: Callable[[], R], attempts: int = 5, delay: float = 0.2) -> R:
    """Repeats a call that failed with UNAVAILABLE or DEADLINE_EXCEEDED (safe here: thread
    ids and idempotency keys make every write of the import repeatable)."""
    for attempt in range(attempts):
        try:
            return fn()
        except (UnavailableError, DeadlineExceededError):
            if attempt == attempts - 1:
                raise
            time.sleep(delay * 2**attempt)
    raise AssertionError("unreachable")


class Importer:
    """Writes an :class:`ImportPlan` through the SDK (see the module's documentation for
    the guarantees). ``workers`` > 1 imports that many threads at once (each thread's
    messages stay in order); ``progress`` is called with the number of messages each
    acknowledged batch (or skipped prefix) holds."""

    def __init__(
        self,
        client: Writer,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        end_threads: bool = True,
        workers: int = 1,
        progress: Callable[[int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.client = client
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self.end_threads = end_threads
        self.workers = workers
        self.progress = progress or (lambda n: None)
        self.clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        #: What the running (or last) import acknowledged so far.
        self.stats = ImportStats()

    def stop(self) -> None:
        """Asks :meth:`run` to stop between batches (safe from a signal handler): the
        batches in flight finish, then it raises :class:`ImportInterrupted`."""
        self._stop.set()

    def run(self, plan: ImportPlan) -> ImportStats:
        """Imports every thread; raises :class:`ThreadImportError` on the first failure, or
        :class:`ImportInterrupted` after :meth:`stop` (the threads before it are stored, and
        the error's ``stats`` say what was; a re-run resumes)."""
        stats = self.stats = ImportStats()
        self._stop.clear()
        started = self.clock()
        try:
            if self.workers == 1:
                for thread in plan.threads:
                    self._one(thread, stats)
            else:
                with ThreadPoolExecutor(self.workers, thread_name_prefix="import") as pool:
                    futures = [pool.submit(self._one, t, stats) for t in plan.threads]
                    done, _ = wait(futures, return_when=FIRST_EXCEPTION)
                    failed = [f for f in done if f.exception() is not None]
                    if failed:
                        self._stop.set()  # the other workers stop at their next batch
                        for f in futures:
                            f.cancel()
                        errors = [e for f in failed if (e := f.exception()) is not None]
                        # A thread that failed is the news; the others were only stopped.
                        raise next(
                            (e for e in errors if not isinstance(e, ImportInterrupted)),
                            errors[0],
                        )
        except (ThreadImportError, ImportInterrupted) as err:
            stats.seconds = self.clock() - started
            err.stats = stats
            raise
        finally:
            stats.seconds = self.clock() - started
        return stats

    def _one(self, thread: ImportThread, stats: ImportStats) -> None:
        if self._stop.is_set():
            raise ImportInterrupted(stats)
        try:
            self.import_thread(thread, stats)
        except (ThreadImportError, ImportInterrupted):
            raise
        except Exception as err:
            raise ThreadImportError(thread, err) from err
        self._count(stats, threads_complete=1)

    def _count(self, stats: ImportStats, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(stats, name, getattr(stats, name) + delta)

    def import_thread(self, thread: ImportThread, stats: ImportStats) -> None:
        """Creates (or finds) the thread, adds the messages it lacks, and ends it."""
        client = self.client
        existing, thread_id = (
            self._thread_by_id(thread) if thread.keeps_id else self._thread_by_key(thread)
        )
        self._count(
            stats,
            threads=1,
            threads_created=existing is None,
            threads_existing=existing is not None,
        )
        messages = thread.messages
        skipped = self._stored_prefix(thread, thread_id, existing)
        if skipped:
            self._count(stats, messages=skipped, already_stored=skipped)
            self.progress(skipped)
        stored_now = 0
        for batch in batches(messages[skipped:], self.batch_size, self.batch_bytes):
            if self._stop.is_set():
                raise ImportInterrupted(stats)
            items = [m.to_new_message() for m in batch]
            result = _retrying(partial(client.add_messages, thread_id, items))
            stored_now += result.stored_count
            self._count(
                stats,
                messages=len(batch),
                stored=result.stored_count,
                already_stored=len(batch) - result.stored_count,
            )
            self.progress(len(batch))
        owed = existing is not None and existing.captured_sequence < existing.message_count
        if self.end_threads and messages and (stored_now or existing is None or owed):
            ended = _retrying(lambda: client.end_thread(thread_id))
            self._count(stats, threads_ended=1, episodes_queued=int(ended.episode_queued))
        outcome = thread.outcome
        if outcome is not None:  # idempotent: the last one stands
            _retrying(
                lambda: client.record_outcome(
                    thread_id, outcome.outcome, score=outcome.score, note=outcome.note
                )
            )
            self._count(stats, outcomes=1)

    def _thread_by_id(self, thread: ImportThread) -> tuple[Thread | None, str]:
        """``--keep-thread-ids``: the thread created with the file's id, or found by it in
        its dataset (None: created now); another dataset's thread of that id stops it."""
        client = self.client
        try:
            _retrying(
                lambda: client.create_thread(
                    thread.dataset,
                    label=thread.label,
                    metadata=thread.metadata or None,
                    thread_id=thread.thread_id,
                )
            )
        except AlreadyExistsError:
            existing = _retrying(lambda: client.get_thread(thread.thread_id))
            if existing.dataset != thread.dataset:
                raise ValueError(
                    f"thread {thread.thread_id} exists in dataset {existing.dataset!r}, "
                    f"not {thread.dataset!r}"
                ) from None
            return existing, thread.thread_id
        return None, thread.thread_id

    def _thread_by_key(self, thread: ImportThread) -> tuple[Thread | None, str]:
        """The thread found or created by :func:`thread_key` in its dataset, or the one an
        import before thread keys created under :func:`thread_uuid` there (so that such an
        import resumes into it). A thread of that old id in *another* dataset is not ours:
        it is ignored, not an error. (None, id) when created now — or found without a
        message, as a run stopped right after creating it leaves it."""
        client = self.client
        try:
            legacy = _retrying(lambda: client.get_thread(thread.thread_id))
        except NotFoundError:
            legacy = None
        if legacy is not None and legacy.dataset == thread.dataset:
            return legacy, legacy.thread_id
        made = _retrying(
            lambda: client.create_thread(
                thread.dataset,
                label=thread.label,
                metadata=thread.metadata or None,
                idempotency_key=thread_key(thread.source_id),
            )
        )
        return (made if made.message_count else None), made.thread_id

    def _stored_prefix(self, thread: ImportThread, thread_id: str, existing: Thread | None) -> int:
        """How many of the thread's first messages are stored already: the thread's
        message count k, when its message k carries the key of our message k (batches are
        written in order and each is atomic, so what an earlier run stored is a prefix)."""
        if existing is None or existing.message_count == 0 or not thread.messages:
            return 0
        k = min(existing.message_count, len(thread.messages))
        page = _retrying(
            lambda: self.client.list_messages(
                thread_id, start_sequence=k, end_sequence=k, page_size=1
            )
        )
        if page.items and page.items[0].idempotency_key == thread.messages[k - 1].idempotency_key:
            return k
        return 0  # not ours in that order: send everything, the keys deduplicate
