"""One stuck session never stalls the suite (issue 45).

A session that holds a row and does nothing — a frozen process inside a transaction, a
paused VM, a debugger, anyone's ``BEGIN; SELECT … FOR UPDATE`` in psql — must delay only
the work on that row:

* the firing skips a thread another session holds and hands its timer back, due again a
  moment later; every other timer of the batch fires (domain, then a running replica);
* the orphan sweep takes a claim whose row a frozen worker key-share locks (the lock the
  facts' foreign keys take), and a worker frozen inside a transaction is ended by
  PostgreSQL (``idle_in_transaction_session_timeout``), loses its claim, and when it wakes
  writes nothing;
* the loops do not wait on each other: with the reclaim loop stuck on a held lease row, the
  timers still fire, and the stuck loop shows in the health check.

The holders here are plain connections with no timeouts of their own: what the suite does
must not depend on the other session's manners.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import timedelta

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import Engine, text

from episodic.crypto import ClearKey
from episodic.services.scheduler import domain
from episodic.store import episodes as states
from episodic.store.db import make_engine
from episodic.testing.processes import wait_until
from tests.scheduler.helpers import (
    add_messages,
    claim_episode,
    dataset_of,
    db_now,
    episodes,
    new_thread,
    settings,
    timer,
)

CFG = settings()


@contextlib.contextmanager
def holding(db_url: str, sql: str, **params: object) -> Iterator[int]:
    """A session outside the suite that runs ``sql`` (a row lock) inside a transaction and
    then sits idle in it until the block ends; yields its backend pid."""
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        row = conn.execute(sql, params).fetchone()  # type: ignore[arg-type]
        assert row is not None, "the holder locked nothing"
        pid = conn.info.backend_pid
        try:
            yield pid
        finally:
            conn.rollback()


def arm(engine: Engine, thread_id: uuid.UUID, seconds: float) -> None:
    with engine.begin() as conn:
        domain.record_activity(
            conn,
            thread_id,
            settings(auto_episode_interval=timedelta(seconds=seconds)),
            dataset=dataset_of(conn, thread_id),
        )


def test_firing_skips_a_held_thread_and_fires_the_rest(engine: Engine, db_url: str) -> None:
    held = new_thread(engine, "stuck-held")
    free = new_thread(engine, "stuck-free")
    add_messages(engine, held, 2)  # and arms the 30-minute idle timer
    add_messages(engine, free, 3)
    at = db_now(engine) + timedelta(minutes=31)
    with holding(db_url, "SELECT 1 FROM threads WHERE thread_id = %(id)s FOR UPDATE", id=held):
        with engine.begin() as conn:
            claimed = domain.claim_due_timers(conn, "replica-a", 10, at)
        assert {t.thread_id for t in claimed} == {held, free}
        with engine.begin() as conn:
            # A wait would fail the test (the holder never lets go while this runs).
            conn.execute(text("SET LOCAL lock_timeout = '5s'"))
            fired = dict(
                zip(
                    [t.thread_id for t in claimed],
                    domain.fire_timers(conn, claimed, "replica-a", at),
                    strict=True,
                )
            )
        assert fired[free].episode is not None and fired[free].timer_deleted
        assert fired[held].deferred and fired[held].episode is None
        assert not fired[held].timer_deleted
        # Handed back: unclaimed, due again a moment after the pass's time.
        again = timer(engine, held)
        assert again["claimed_by"] is None
        assert again["fire_at"] >= at + domain.FIRE_RETRY_DELAY
        assert episodes(engine, held) == []
    # The holder let go: a later pass fires it.
    later = at + domain.FIRE_RETRY_DELAY * 2
    with engine.begin() as conn:
        claimed = domain.claim_due_timers(conn, "replica-a", 10, later)
    assert [t.thread_id for t in claimed] == [held]
    with engine.begin() as conn:
        (result,) = domain.fire_timers(conn, claimed, "replica-a", later)
    assert result.episode is not None and result.timer_deleted and not result.deferred
    assert [(e["start_sequence"], e["end_sequence"]) for e in episodes(engine, held)] == [(1, 2)]


def test_reclaim_takes_a_claim_whose_row_a_frozen_worker_key_locks(
    engine: Engine, db_url: str
) -> None:
    thread_id = new_thread(engine, "stuck-keyshare", messages=2)
    with engine.begin() as conn:
        episode = domain.request_episode(conn, thread_id, dataset="stuck-keyshare").episode
    assert episode is not None
    long_ago = db_now(engine) - timedelta(hours=1)
    claim_episode(engine, episode["episode_id"], "frozen:1:x", at=long_ago)
    # A frozen worker's transaction that inserted facts of the episode holds the key-share
    # lock their foreign key took on the episode's row.
    with holding(
        db_url,
        "SELECT 1 FROM episodes WHERE episode_id = %(id)s FOR KEY SHARE",
        id=episode["episode_id"],
    ):
        with engine.begin() as conn:
            lost = states.reclaim_orphaned(conn, older_than=timedelta(minutes=10), max_retries=3)
        assert lost.requeued == 1
    with engine.connect() as conn:
        row = conn.execute(
            text("SELECT status, claimed_by FROM episodes WHERE episode_id = :id"),
            {"id": episode["episode_id"]},
        ).one()
    assert tuple(row) == ("pending", None)


def test_a_worker_frozen_inside_a_transaction_is_ended_and_writes_nothing(
    engine: Engine, db_url: str
) -> None:
    thread_id = new_thread(engine, "stuck-frozen", messages=2)
    with engine.begin() as conn:
        domain.request_episode(conn, thread_id, dataset="stuck-frozen")
    worker = "frozen:2:y"
    # The worker's engine bounds its sessions as every service's does (short here).
    worker_engine = make_engine(
        db_url, pool_size=1, session_settings={"idle_in_transaction_session_timeout": "300ms"}
    )
    try:
        with worker_engine.begin() as conn:
            (claimed,) = states.claim_pending(conn, worker, 1)
        # Its heartbeat runs, and the process freezes before the commit: the row stays
        # locked by a session that does nothing.
        frozen = worker_engine.connect()
        frozen.begin()
        assert states.renew_claims(frozen, worker) == 1
        pid = frozen.execute(text("SELECT pg_backend_pid()")).scalar_one()

        def ended() -> bool:
            with engine.connect() as conn:
                return not conn.execute(
                    text("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = :p)"),
                    {"p": pid},
                ).scalar_one()

        wait_until(ended, timeout=30, message="PostgreSQL ends the frozen session")
        # Its claim, no longer renewed, is reclaimed by the sweep.
        with engine.begin() as conn:
            lost = states.reclaim_orphaned(conn, older_than=timedelta(0), max_retries=3)
        assert lost.requeued == 1
        # The worker wakes: its transaction is gone, and a fresh one writes nothing.
        with pytest.raises(Exception):  # noqa: B017 - psycopg's or SQLAlchemy's, either way
            frozen.execute(text("SELECT 1"))
        with contextlib.suppress(Exception):
            frozen.close()
        with worker_engine.begin() as conn:
            status = states.complete(
                conn,
                claimed,
                worker,
                key=ClearKey("stuck-frozen"),
                summary="stale",
                key_learnings=[],
                entities=[],
                event_type="conversation",
                actor="",
                embedding=[0.0] * 384,
            )
        assert status is None
        with engine.connect() as conn:
            row = conn.execute(
                text("SELECT status, summary FROM episodes WHERE episode_id = :id"),
                {"id": claimed["episode_id"]},
            ).one()
        assert row[0] == "pending" and b"stale" not in bytes(row[1] or b"")
    finally:
        worker_engine.dispose()


FAST = {
    "EPISODIC_SCHEDULER_POLL_INTERVAL": "0.05",
    "EPISODIC_ORPHAN_RECLAIM_AFTER": "1",
    "EPISODIC_LEASE_TTL": "1",
    "EPISODIC_DB_HEALTH_INTERVAL": "0.1",
    "EPISODIC_LOG_LEVEL": "WARNING",
}


def _health(channel: grpc.Channel, service: str) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        return int(stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status)
    except grpc.RpcError as err:  # not registered yet
        assert err.code() == grpc.StatusCode.NOT_FOUND, err
        return -1


def test_a_running_scheduler_fires_other_threads_while_one_is_held(
    spawn, engine: Engine, db_url: str
) -> None:  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler", env=FAST)
    held = new_thread(engine, "stuck-run-held", messages=2)
    free = new_thread(engine, "stuck-run-free", messages=2)
    arm(engine, held, 1.0)
    arm(engine, free, 1.0)
    with holding(db_url, "SELECT 1 FROM threads WHERE thread_id = %(id)s FOR UPDATE", id=held):
        wait_until(lambda: episodes(engine, free), timeout=60, message="the free thread fires")
        assert episodes(engine, held) == []
        # The held thread's timer is kept (handed back, tried again), not lost or stranded.
        assert timer(engine, held) is not None
        serving = health_pb2.HealthCheckResponse.SERVING
        assert wait_until(
            lambda: _health(scheduler.channel(), "episodic.loop.scheduler.timers") == serving,
            timeout=30,
            message="the timers loop is not stalled",
        )
    wait_until(lambda: episodes(engine, held), timeout=60, message="the held thread fires")


def test_a_stuck_reclaim_neither_stops_the_timers_nor_hides(
    spawn, engine: Engine, db_url: str
) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO leases (name, holder, expires_at) "
                "VALUES ('scheduler.reclaim', 'nobody', '-infinity') ON CONFLICT DO NOTHING"
            )
        )
    # The reclaim loop will wait on the lease row for as long as the holder keeps it.
    env = {**FAST, "EPISODIC_DB_LOCK_TIMEOUT": "600", "EPISODIC_LOOP_STALL_AFTER": "0.5"}
    not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
    serving = health_pb2.HealthCheckResponse.SERVING
    with holding(
        db_url, "SELECT 1 FROM leases WHERE name = 'scheduler.reclaim' FOR UPDATE"
    ) as holder:
        scheduler = spawn("scheduler", env=env)
        channel = scheduler.channel()
        wait_until(
            lambda: _health(channel, "episodic.loop.scheduler.reclaim") == not_serving,
            timeout=60,
            message="the stuck reclaim loop shows in the health check",
        )
        assert _health(channel, "episodic.v1.SchedulerService") == not_serving
        assert _health(channel, "episodic.loop.scheduler.timers") == serving

        def reclaim_waits() -> bool:
            with engine.connect() as conn:
                return bool(
                    conn.execute(
                        text(
                            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity "
                            "WHERE :h = ANY(pg_blocking_pids(pid)))"
                        ),
                        {"h": holder},
                    ).scalar_one()
                )

        assert reclaim_waits()
        # Meanwhile the timers fire.
        thread_id = new_thread(engine, "stuck-reclaim", messages=2)
        arm(engine, thread_id, 0.5)
        wait_until(lambda: episodes(engine, thread_id), timeout=60, message="the timer fires")
    wait_until(
        lambda: _health(channel, "episodic.loop.scheduler.reclaim") == serving,
        timeout=60,
        message="the reclaim loop moves again once the lease row is free",
    )
    assert wait_until(
        lambda: _health(channel, "episodic.v1.SchedulerService") == serving, timeout=30
    )


def test_the_backstop_skips_a_held_thread_and_opens_the_others(engine: Engine, db_url: str) -> None:
    from episodic.services.scheduler.sweeper import Sweeper

    held = new_thread(engine, "stuck-backstop-held")
    free = new_thread(engine, "stuck-backstop-free")
    for thread_id in (held, free):  # messages with no timer: the backstop's to open
        add_messages(engine, thread_id, 2, notify=False)
    later = db_now(engine) + CFG.backstop_quiet_period + timedelta(minutes=1)
    # A wait for the held thread would fail the sweep (the holder never lets go meanwhile).
    bounded = make_engine(db_url, pool_size=2, session_settings={"lock_timeout": "5s"})
    try:
        with holding(db_url, "SELECT 1 FROM threads WHERE thread_id = %(id)s FOR UPDATE", id=held):
            assert Sweeper(bounded, CFG).backstop(later) == 1
            assert episodes(engine, held) == []
            assert [e["trigger"] for e in episodes(engine, free)] == ["backstop"]
        assert Sweeper(bounded, CFG).backstop(later) == 1  # the next pass opens it
        assert [e["trigger"] for e in episodes(engine, held)] == ["backstop"]
    finally:
        bounded.dispose()


def test_every_service_session_starts_with_its_bounds(db_url: str) -> None:
    from episodic.config import DatabaseSettings

    settings = DatabaseSettings(database_url=db_url)
    for background, expected in (
        (
            True,
            {
                "idle_in_transaction_session_timeout": "1min",
                "lock_timeout": "10s",
                "statement_timeout": "5min",
                "transaction_timeout": "5min",  # PostgreSQL 17+: the embedded one is 18
            },
        ),
        (
            False,
            {
                "idle_in_transaction_session_timeout": "1min",
                "lock_timeout": "10s",
                "statement_timeout": "0",
                "transaction_timeout": "0",
            },
        ),
    ):
        bounded = make_engine(
            db_url, pool_size=1, session_settings=settings.session_settings(background=background)
        )
        try:
            with bounded.connect() as conn:
                shown = {name: conn.execute(text(f"SHOW {name}")).scalar_one() for name in expected}
        finally:
            bounded.dispose()
        assert shown == expected, background
