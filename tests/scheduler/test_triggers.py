"""The four triggers, each on its own, through the domain functions (no gRPC)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import psycopg
import pytest
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import text

from episodic.errors import NotFound
from episodic.services.scheduler import domain
from episodic.services.scheduler.sweeper import Sweeper
from episodic.testing.invariants import check_invariants
from episodic.testing.keys import test_vault
from tests.scheduler.helpers import (
    add_messages,
    dataset_of,
    db_now,
    episodes,
    new_thread,
    set_quiet_since,
    settings,
    thread_row,
    timer,
    windows,
)

CFG = settings()


def request(engine, thread_id, trigger="explicit", now=None):  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        return domain.request_episode(
            conn, thread_id, trigger, now, dataset=dataset_of(conn, thread_id)
        ).episode


# -- 1. explicit -----------------------------------------------------------------------


def test_explicit_queues_an_episode_over_the_uncaptured_messages(engine) -> None:  # type: ignore[no-untyped-def]
    thread_id = new_thread(engine, messages=3)
    episode = request(engine, thread_id)
    assert episode is not None
    assert (episode["start_sequence"], episode["end_sequence"]) == (1, 3)
    assert episode["message_count"] == 3
    assert episode["status"] == "pending" and episode["semantic_status"] == "pending"
    assert episode["trigger"] == "explicit"
    with engine.connect() as conn:  # the label is sealed at rest
        assert test_vault().open_one(conn, episode, "episodes")["thread_label"] == "label-user_42"
    with engine.connect() as conn:
        first, last = conn.execute(
            text("SELECT min(created_at), max(created_at) FROM messages WHERE thread_id = :id"),
            {"id": thread_id},
        ).one()
    assert (episode["started_at"], episode["ended_at"]) == (first, last)
    assert thread_row(engine, thread_id)["captured_sequence"] == 3

    # A checkpoint, not a close: the thread takes more messages and the next window follows.
    add_messages(engine, thread_id, 2, notify=False)
    assert request(engine, thread_id) is not None
    assert windows(engine, thread_id) == [(1, 3, "explicit"), (4, 5, "explicit")]
    check_invariants(engine, all_covered=True)


def test_explicit_with_nothing_uncaptured_creates_nothing(engine) -> None:  # type: ignore[no-untyped-def]
    empty = new_thread(engine)
    assert request(engine, empty) is None
    covered = new_thread(engine, messages=2)
    assert request(engine, covered) is not None
    assert request(engine, covered) is None
    assert len(episodes(engine)) == 1
    with pytest.raises(NotFound):
        request(engine, uuid.uuid4())


def test_explicit_drops_the_idle_timer_and_a_later_message_rearms_it(engine) -> None:  # type: ignore[no-untyped-def]
    thread_id = new_thread(engine)
    add_messages(engine, thread_id, 2)
    assert timer(engine, thread_id) is not None
    request(engine, thread_id)
    assert timer(engine, thread_id) is None
    add_messages(engine, thread_id, 1)
    assert timer(engine, thread_id)["trigger"] == "inactivity"


def test_opening_an_episode_notifies_summarisers_on_commit(engine, db_url) -> None:  # type: ignore[no-untyped-def]
    thread_id = new_thread(engine, messages=1)
    with psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute("LISTEN episodic_episodes")
        episode = request(engine, thread_id)
        got = [n.payload for n in listener.notifies(timeout=10, stop_after=1)]
    assert got == [str(episode["episode_id"])]


def test_the_trigger_trace_context_is_stored_on_the_episode(engine) -> None:  # type: ignore[no-untyped-def]
    thread_id = new_thread(engine, messages=1)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("end-thread") as span:
        episode = request(engine, thread_id)
    trace_id = format(span.get_span_context().trace_id, "032x")
    with engine.connect() as conn:
        stored = conn.execute(
            text("SELECT trace_context FROM episodes WHERE episode_id = :id"),
            {"id": episode["episode_id"]},
        ).scalar_one()
    assert trace_id in stored["traceparent"]


# -- 2. a new thread in the dataset ----------------------------------------------------


def test_new_thread_pulls_sibling_timers_forward_but_never_later(engine) -> None:  # type: ignore[no-untyped-def]
    now = db_now(engine)
    waiting = new_thread(engine, "ds")
    add_messages(engine, waiting, 2, now=now)  # fires at now + 30 min
    sooner = new_thread(engine, "ds")
    add_messages(engine, sooner, 1, now=now - timedelta(minutes=28))  # fires at now + 2 min
    captured = new_thread(engine, "ds")
    add_messages(engine, captured, 1, now=now)
    request(engine, captured)
    with engine.begin() as conn:  # a stale timer on a thread with nothing uncaptured
        domain.record_activity(conn, captured, CFG, now, dataset=dataset_of(conn, captured))
    lost_notice = new_thread(engine, "ds", messages=1)  # uncaptured, but no timer
    being_fired = new_thread(engine, "ds")
    add_messages(engine, being_fired, 1, now=now)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE scheduled_episodes SET claimed_at = now(), claimed_by = 'other' "
                "WHERE thread_id = :id"
            ),
            {"id": being_fired},
        )
    elsewhere = new_thread(engine, "other_ds")
    add_messages(engine, elsewhere, 1, now=now)
    before = {t: timer(engine, t) for t in (sooner, captured, being_fired, elsewhere)}

    newcomer = new_thread(engine, "ds")
    with engine.begin() as conn:
        pulled = domain.record_thread_started(
            conn, newcomer, CFG, now, dataset=dataset_of(conn, newcomer)
        )

    assert pulled == 2
    limit = now + timedelta(minutes=5)
    for thread_id in (waiting, lost_notice):
        row = timer(engine, thread_id)
        assert row["fire_at"] == limit and row["trigger"] == "new_thread"
    for thread_id, row in before.items():
        assert timer(engine, thread_id) == row, "must not be touched"
    assert timer(engine, newcomer) is None

    # Fired at the pulled-forward time, with that trigger.
    result = Sweeper(engine, CFG).run_pass(limit + timedelta(seconds=1), force=True)
    assert result.episodes_created == 3  # waiting, lost_notice, sooner
    assert windows(engine, waiting) == [(1, 2, "new_thread")]
    assert windows(engine, sooner) == [(1, 1, "inactivity")]
    assert windows(engine, elsewhere) == []


# -- 3. inactivity ---------------------------------------------------------------------


def test_a_burst_of_messages_yields_exactly_one_episode(engine) -> None:  # type: ignore[no-untyped-def]
    now = db_now(engine)
    thread_id = new_thread(engine)
    sweeper = Sweeper(engine, CFG)
    versions = []
    for minute in range(10):  # a message a minute: each pushes the deadline out
        add_messages(engine, thread_id, 1, now=now + timedelta(minutes=minute))
        row = timer(engine, thread_id)
        assert row["fire_at"] == now + timedelta(minutes=minute + 30)
        versions.append(row["version"])
        assert sweeper.run_pass(now + timedelta(minutes=minute), force=True).episodes_created == 0
    assert versions == sorted(set(versions))

    last = now + timedelta(minutes=9)
    assert sweeper.run_pass(last + timedelta(minutes=29), force=True).episodes_created == 0
    result = sweeper.run_pass(last + timedelta(minutes=30), force=True)
    assert result.episodes_created == 1
    assert windows(engine, thread_id) == [(1, 10, "inactivity")]
    assert timer(engine, thread_id) is None
    assert not sweeper.run_pass(last + timedelta(hours=5), force=True)
    check_invariants(engine, all_covered=True)


def test_activity_does_not_postpone_an_owed_explicit_episode(engine) -> None:  # type: ignore[no-untyped-def]
    # EndThread was recorded while the Scheduler was down; the catch-up made the timer.
    now = db_now(engine)
    thread_id = new_thread(engine, messages=2)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE threads SET end_requested_sequence = 2 WHERE thread_id = :id"),
            {"id": thread_id},
        )
        assert domain.catch_up(conn, CFG, now) == 1
    add_messages(engine, thread_id, 1, now=now + timedelta(seconds=1))
    row = timer(engine, thread_id)
    assert row["trigger"] == "explicit" and row["fire_at"] == now


# -- 4. backstop -----------------------------------------------------------------------


def test_backstop_covers_quiet_threads_with_no_timer(engine) -> None:  # type: ignore[no-untyped-def]
    now = db_now(engine)
    forgotten = new_thread(engine, messages=3)
    set_quiet_since(engine, forgotten, now - timedelta(hours=25))
    recent = new_thread(engine, messages=1)
    set_quiet_since(engine, recent, now - timedelta(hours=23))
    timed = new_thread(engine)
    add_messages(engine, timed, 1, now=now)
    set_quiet_since(engine, timed, now - timedelta(hours=25))

    sweeper = Sweeper(engine, CFG)
    assert sweeper.backstop(now) == 1
    assert windows(engine, forgotten) == [(1, 3, "backstop")]
    assert windows(engine, recent) == [] and windows(engine, timed) == []
    assert sweeper.backstop(now) == 0


def test_backstop_runs_in_a_pass_on_its_schedule_and_on_one_replica(engine) -> None:  # type: ignore[no-untyped-def]
    now = db_now(engine)
    a, b = Sweeper(engine, CFG, "replica-a"), Sweeper(engine, CFG, "replica-b")

    def forgotten_thread() -> uuid.UUID:
        t = new_thread(engine, messages=1)
        set_quiet_since(engine, t, now - timedelta(hours=30))
        return t

    first = forgotten_thread()
    assert a.run_pass(now).backstop_episodes == 1  # never ran before: due
    assert windows(engine, first) == [(1, 1, "backstop")]

    second = forgotten_thread()
    # B: A holds the lease. A: ran less than backstop_interval ago (on the lease row). The
    # catch-up of these passes covers the thread instead (a timer due long ago, fired).
    assert b.run_pass(now).backstop_episodes == 0
    assert Sweeper(engine, CFG, "replica-a").run_pass(now).backstop_episodes == 0
    assert windows(engine, second) == [(1, 1, "inactivity")]

    third = forgotten_thread()
    with engine.begin() as conn:  # an hour later, A gone
        conn.execute(
            text(
                "UPDATE leases SET last_run_at = now() - interval '61 minutes', "
                "expires_at = '-infinity' WHERE name = 'scheduler.backstop'"
            )
        )
    # (a fresh sweeper: B's own clock would by then also have told it to look again)
    assert Sweeper(engine, CFG, "replica-b").run_pass(now).backstop_episodes == 1
    assert windows(engine, third) == [(1, 1, "backstop")]
    check_invariants(engine, all_covered=True)


def test_an_idle_episode_carries_the_trace_of_the_write_that_armed_its_timer(engine) -> None:  # type: ignore[no-untyped-def]
    now = db_now(engine)
    thread_id = new_thread(engine)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("add-messages") as span:
        add_messages(engine, thread_id, 1, now=now)
    trace_id = format(span.get_span_context().trace_id, "032x")
    assert trace_id in timer(engine, thread_id)["trace_context"]["traceparent"]
    Sweeper(engine, CFG).run_pass(now + timedelta(hours=1), force=True)
    (episode,) = episodes(engine, thread_id)
    assert trace_id in episode["trace_context"]["traceparent"]
