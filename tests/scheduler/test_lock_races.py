"""The Scheduler's notices and sweeps against concurrent erasures and each other, with real
transactions interleaved deterministically: a second connection holds a lock, the call
under test is seen waiting for it (``pg_blocking_pids``), then the holder commits.

* A thread erased between a notice's existence check and its write answers NOT_FOUND —
  the answer a missing thread gets — never INTERNAL (a foreign key violation on the
  timer, or an episode opened over messages the erasure already deleted).
* RecordThreadStarted takes its locks in the sweep's order (each thread's row before its
  timer, threads in id order), and the catch-up skips timers it would otherwise wait for
  while holding the timers it inserted: the two cannot deadlock.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from sqlalchemy import Connection, Engine, text

from episodic.services.scheduler import domain
from episodic.store import episodes as states
from episodic.testing.processes import wait_until
from episodic.v1 import scheduler_service_pb2 as pb
from episodic.v1 import scheduler_service_pb2_grpc as g
from tests.scheduler.helpers import (
    add_messages,
    dataset_of,
    episodes,
    new_thread,
    settings,
    thread_row,
    timer,
)

CFG = settings()


def _waits_for(engine: Engine, holder: int, pid: int | None = None) -> bool:
    """Whether backend ``pid`` (any backend when None) waits for a lock ``holder`` holds."""
    with engine.connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT EXISTS (SELECT 1 FROM pg_stat_activity "
                    "WHERE (CAST(:p AS integer) IS NULL OR pid = :p) "
                    "AND CAST(:h AS integer) = ANY(pg_blocking_pids(pid)))"
                ),
                {"p": pid, "h": holder},
            ).scalar()
        )


def _blocked(engine: Engine, pid: int) -> bool:
    """Whether backend ``pid`` waits for any lock."""
    with engine.connect() as conn:
        return bool(
            conn.execute(text("SELECT cardinality(pg_blocking_pids(:p)) > 0"), {"p": pid}).scalar()
        )


class Background:
    """``work`` in a thread of its own; ``.result`` / ``.error`` once done."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()

        def run() -> None:
            try:
                self.result = work()
            except BaseException as err:  # handed to the test
                self.error = err
            finally:
                self.done.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> Any:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the call never finished"
        if self.error is not None:
            raise self.error
        return self.result


class InTransaction(Background):
    """``work(conn)`` in a transaction of its own connection; ``.pid`` is its backend."""

    def __init__(self, engine: Engine, work: Callable[[Connection], Any]) -> None:
        self.pid = 0
        ready = threading.Event()

        def run() -> Any:
            with engine.begin() as conn:
                self.pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
                ready.set()
                return work(conn)

        super().__init__(run)
        ready.wait(30)
        assert self.pid, "the transaction did not start"


def _erase_thread(conn: Connection, thread_id: uuid.UUID) -> None:
    """The statements of an erasure's last transaction (store/erasure.py): the thread's row
    lock, then its rows, its timer and the thread itself."""
    dataset = dataset_of(conn, thread_id)
    args = {"d": dataset, "t": thread_id}
    conn.execute(
        text("SELECT 1 FROM threads WHERE dataset = :d AND thread_id = :t FOR UPDATE"), args
    )
    for table in ("messages", "episodes", "scheduled_episodes", "threads"):
        conn.execute(text(f"DELETE FROM {table} WHERE dataset = :d AND thread_id = :t"), args)


def _holding(engine: Engine, hold: Callable[[Connection], None]) -> tuple[Connection, int]:
    holder = engine.connect()
    holder.begin()
    pid = holder.execute(text("SELECT pg_backend_pid()")).scalar_one()
    hold(holder)
    return holder, pid


# ---------------------------------------------------------------------------------------
# A: erasure between a notice's check and its write


def _record_activity(stub: g.SchedulerServiceStub, t: uuid.UUID) -> Any:
    return stub.RecordActivity(pb.RecordActivityRequest(thread_id=str(t)), timeout=30)


def _thread_started(stub: g.SchedulerServiceStub, t: uuid.UUID) -> Any:
    return stub.RecordThreadStarted(pb.RecordThreadStartedRequest(thread_id=str(t)), timeout=30)


def _request_episode(stub: g.SchedulerServiceStub, t: uuid.UUID) -> Any:
    return stub.RequestEpisode(pb.RequestEpisodeRequest(thread_id=str(t)), timeout=30)


@pytest.mark.parametrize(
    ("rpc", "armed"),
    [
        ("RecordActivity", True),  # the timer's upsert: the conflicting row is deleted
        ("RecordActivity", False),  # the timer's insert: its foreign key meets the erasure
        ("RecordThreadStarted", True),  # DeleteDataset: the thread and its sibling
        ("RequestEpisode", True),
    ],
)
def test_a_notice_racing_the_erasure_of_its_thread_answers_not_found(  # type: ignore[no-untyped-def]
    spawn, engine, rpc: str, armed: bool
) -> None:
    """The notice has found the thread (the servicer's routing lookup) when the erasure's
    last transaction takes the thread's row and deletes it; the notice waits for the
    erasure, then answers NOT_FOUND with the message of a thread that never existed —
    before, RecordActivity and RecordThreadStarted wrote the timer anyway and failed its
    foreign key: INTERNAL, with an ERROR and a traceback in the log."""
    stub = g.SchedulerServiceStub(spawn("scheduler").channel())
    calls = {
        "RecordActivity": _record_activity,
        "RecordThreadStarted": _thread_started,
        "RequestEpisode": _request_episode,
    }
    call = calls[rpc]
    thread_id = new_thread(engine, "erased", messages=2)
    sibling = new_thread(engine, "erased", messages=2)
    if armed:
        add_messages(engine, thread_id, 1)
        add_messages(engine, sibling, 1)
    missing = uuid.uuid4()
    with pytest.raises(grpc.RpcError) as never_was:
        call(stub, missing)
    assert never_was.value.code() == grpc.StatusCode.NOT_FOUND

    def erase(conn: Connection) -> None:
        _erase_thread(conn, thread_id)
        if rpc == "RecordThreadStarted":
            _erase_thread(conn, sibling)  # DeleteDataset erases every thread

    holder, holder_pid = _holding(engine, erase)
    try:
        racing = Background(lambda: call(stub, thread_id))
        wait_until(
            lambda: _waits_for(engine, holder_pid) or racing.done.is_set(),
            timeout=30,
            message=f"{rpc} waits for the erasure",
        )
        assert not racing.done.is_set(), f"{rpc} did not wait for the erasure's locks"
        holder.commit()
    finally:
        holder.close()
    with pytest.raises(grpc.RpcError) as raced:
        racing.join()
    assert raced.value.code() == grpc.StatusCode.NOT_FOUND, raced.value.details()
    assert raced.value.details() == f"thread {thread_id} does not exist"
    assert never_was.value.details() == f"thread {missing} does not exist"
    assert timer(engine, thread_id) is None  # nothing written for the erased thread


def test_record_thread_started_skips_a_sibling_being_erased(engine) -> None:  # type: ignore[no-untyped-def]
    """A sibling held by its erasure is skipped (it is going); the other siblings are still
    pulled forward, and the call neither waits for the erasure nor fails its timer's
    foreign key."""
    newcomer = new_thread(engine, "sib")
    erased = new_thread(engine, "sib", messages=1)
    kept = new_thread(engine, "sib", messages=1)
    for t in (erased, kept):
        add_messages(engine, t, 1)
    holder, holder_pid = _holding(engine, lambda conn: _erase_thread(conn, erased))
    try:
        started = InTransaction(
            engine,
            lambda conn: domain.record_thread_started(conn, newcomer, CFG, dataset="sib"),
        )
        wait_until(
            lambda: started.done.is_set() or _waits_for(engine, holder_pid, started.pid),
            timeout=30,
            message="RecordThreadStarted finishes or waits",
        )
        holder.commit()
    finally:
        holder.close()
    assert started.join() == 1
    assert timer(engine, kept)["trigger"] == "new_thread"
    assert timer(engine, erased) is None


def test_request_episode_while_the_erasure_deletes_the_messages(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """The erasure deletes a thread's messages in slices (committed one by one) before it
    takes the thread's row. RequestEpisode in between opens nothing — the window's
    messages are gone — instead of an episode without a start time (a NOT NULL violation:
    INTERNAL), and the sweep fires the thread's timer the same way."""
    stub = g.SchedulerServiceStub(spawn("scheduler").channel())
    thread_id = new_thread(engine, "slices", messages=3)
    fired = new_thread(engine, "slices", messages=3)
    add_messages(engine, fired, 1)
    with engine.begin() as conn:  # one slice of each thread: its first messages
        conn.execute(
            text("DELETE FROM messages WHERE thread_id = ANY(:t) AND sequence <= 2"),
            {"t": [thread_id, fired]},
        )
    answer = _request_episode(stub, thread_id)
    assert not answer.episode_queued
    assert episodes(engine, thread_id) == []
    assert thread_row(engine, thread_id)["captured_sequence"] == 0

    with engine.begin() as conn:
        conn.execute(text("UPDATE scheduled_episodes SET fire_at = now() - interval '1 second'"))
    swept = stub.RunSweep(pb.RunSweepRequest(), timeout=30)
    assert swept.episodes_created == 0 and swept.timers_dropped == 1
    assert timer(engine, fired) is None and episodes(engine, fired) == []


# ---------------------------------------------------------------------------------------
# B: RecordThreadStarted against the sweep


def _owed(engine: Engine, thread_id: uuid.UUID) -> None:
    """An EndThread whose RequestEpisode was lost: the catch-up makes the timer explicit."""
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE threads SET end_requested_sequence = last_sequence WHERE thread_id = :t"),
            {"t": thread_id},
        )


def test_record_thread_started_and_the_catch_up_do_not_deadlock(engine) -> None:  # type: ignore[no-untyped-def]
    """The interleaving the probe's deadlocks showed (16 threads of a dataset created at
    once against the sweep): the catch-up inserted sibling B's timer, then wanted sibling
    A's timer (an owed EndThread makes it due now) while RecordThreadStarted held A's
    timer and waited for B's (thread order, A < B). Here a third transaction holds A's
    timer so that RecordThreadStarted queues on it first; the catch-up comes next; then A
    is let go. Before, PostgreSQL killed one of the two (40P01: UNAVAILABLE "the database
    is unavailable", and the new-thread trigger lost); now the catch-up skips the timer
    being written, finishes, and its next pass makes A's timer explicit."""
    a, b = sorted(new_thread(engine, "burst", messages=1) for _ in range(2))
    newcomer = new_thread(engine, "burst")
    add_messages(engine, a, 1)  # A has an idle timer; B's notice was lost (no timer)
    _owed(engine, a)
    assert timer(engine, b) is None

    def hold(conn: Connection) -> None:
        conn.execute(
            text("SELECT 1 FROM scheduled_episodes WHERE thread_id = :t FOR UPDATE"), {"t": a}
        )

    holder, holder_pid = _holding(engine, hold)
    try:
        started = InTransaction(
            engine,
            lambda conn: domain.record_thread_started(conn, newcomer, CFG, dataset="burst"),
        )
        wait_until(
            lambda: _waits_for(engine, holder_pid, started.pid),
            timeout=30,
            message="RecordThreadStarted waits for A's timer",
        )
        caught = InTransaction(engine, lambda conn: domain.catch_up(conn, CFG))
        wait_until(
            lambda: caught.done.is_set() or _blocked(engine, caught.pid),
            timeout=30,
            message="the catch-up finishes or waits",
        )
        holder.commit()
    finally:
        holder.close()
    assert caught.join() >= 1  # B's timer
    assert started.join() == 2  # A's and B's timers pulled forward
    with engine.begin() as conn:
        assert domain.catch_up(conn, CFG) == 1  # A's owed explicit episode, skipped above
    assert timer(engine, a)["trigger"] == "explicit"
    assert timer(engine, b)["trigger"] == "new_thread"


def test_record_thread_started_does_not_wait_for_a_batch_being_fired(engine) -> None:  # type: ignore[no-untyped-def]
    """A firing batch holds its threads' rows (FOR UPDATE) and then wants their timers.
    RecordThreadStarted takes a sibling's row before its timer and skips a sibling held
    FOR UPDATE, so it never holds a timer such a batch waits for while it waits for the
    batch: it finishes at once, and the batch then fires its timer."""
    fired = new_thread(engine, "fire", messages=1)
    other = new_thread(engine, "fire", messages=1)
    newcomer = new_thread(engine, "fire")
    for t in (fired, other):
        add_messages(engine, t, 1)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE scheduled_episodes SET fire_at = now() - interval '1 second' "
                "WHERE thread_id = :t"
            ),
            {"t": fired},
        )
    with engine.begin() as conn:
        claimed = domain.claim_due_timers(conn, "w1", 10)
    assert [c.thread_id for c in claimed] == [fired]

    batch = engine.connect()
    batch.begin()
    try:
        # The batch's first statement: its threads' row locks (held until it commits).
        states.open_episodes(batch, [states.EpisodeToOpen("fire", fired, claimed[0].trigger, None)])
        with engine.begin() as conn:
            conn.execute(text("SET LOCAL lock_timeout = '10s'"))  # a wait fails the test
            assert domain.record_thread_started(conn, newcomer, CFG, dataset="fire") == 1
        results = domain.fire_timers(batch, claimed, "w1")
        batch.commit()
    finally:
        batch.close()
    assert results[0].timer_deleted
    assert timer(engine, fired) is None
    assert timer(engine, other)["trigger"] == "new_thread"
