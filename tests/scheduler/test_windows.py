"""Windows: contiguous from 1, never overlapping, whatever the triggers; permanent even for
an episode that failed for good."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import text

from episodic.services.ingest import domain as ingest
from episodic.services.scheduler import domain
from episodic.services.scheduler.sweeper import Sweeper
from episodic.store import episodes as states
from episodic.testing.invariants import InvariantViolation, check_invariants
from episodic.testing.keys import test_vault
from tests.scheduler.helpers import (
    INGEST,
    add_messages,
    claim_episode,
    dataset_of,
    db_now,
    episodes,
    new_thread,
    set_quiet_since,
    settings,
    thread_row,
    windows,
)

CFG = settings()


def test_every_trigger_continues_where_the_last_window_ended(engine) -> None:  # type: ignore[no-untyped-def]
    now = db_now(engine)
    sweeper = Sweeper(engine, CFG)
    thread_id = new_thread(engine, "ds")
    add_messages(engine, thread_id, 3, now=now)
    with engine.begin() as conn:
        domain.request_episode(
            conn, thread_id, "explicit", now, dataset=dataset_of(conn, thread_id)
        )
    add_messages(engine, thread_id, 2, now=now)
    sweeper.run_pass(now + timedelta(minutes=31), force=True)  # inactivity
    add_messages(engine, thread_id, 4, now=now + timedelta(minutes=40))
    sibling = new_thread(engine, "ds")
    with engine.begin() as conn:
        domain.record_thread_started(
            conn, sibling, CFG, now + timedelta(minutes=41), dataset=dataset_of(conn, sibling)
        )
    sweeper.run_pass(now + timedelta(minutes=47), force=True)  # new thread
    add_messages(engine, thread_id, 1, notify=False)
    set_quiet_since(engine, thread_id, now - timedelta(days=2))
    sweeper.backstop(now + timedelta(minutes=50))  # backstop
    add_messages(engine, thread_id, 2, notify=False)
    with engine.begin() as conn:
        domain.request_episode(conn, thread_id, "manual", now, dataset=dataset_of(conn, thread_id))

    assert windows(engine, thread_id) == [
        (1, 3, "explicit"),
        (4, 5, "inactivity"),
        (6, 9, "new_thread"),
        (10, 10, "backstop"),
        (11, 12, "manual"),
    ]
    check_invariants(engine, all_covered=True)


def test_a_window_that_failed_for_good_stays_and_the_next_starts_after_it(engine) -> None:  # type: ignore[no-untyped-def]
    max_retries = 2
    thread_id = new_thread(engine, messages=3)
    with engine.begin() as conn:
        failed = domain.request_episode(
            conn, thread_id, dataset=dataset_of(conn, thread_id)
        ).episode
    statuses = []
    for _ in range(3):  # first attempt + max_retries retries
        claim_episode(engine, failed["episode_id"], "summariser-1")
        with engine.begin() as conn:
            statuses.append(
                states.record_failure(
                    conn,
                    failed["episode_id"],
                    "summariser-1",
                    "llm timed out",
                    max_retries=max_retries,
                    backoff=timedelta(0),
                    dataset=failed["dataset"],
                )
            )
    assert statuses == ["pending", "pending", "failed"]

    # The window is not given back: captured_sequence stays, the next episode follows it.
    assert thread_row(engine, thread_id)["captured_sequence"] == 3
    add_messages(engine, thread_id, 2, notify=False)
    with engine.begin() as conn:
        assert (
            domain.request_episode(conn, thread_id, dataset=dataset_of(conn, thread_id)).episode
            is not None
        )
    rows = episodes(engine, thread_id)
    assert [(e["start_sequence"], e["end_sequence"], e["status"]) for e in rows] == [
        (1, 3, "failed"),
        (4, 5, "pending"),
    ]
    assert rows[0]["error"] == "llm timed out" and rows[0]["retry_count"] == 3
    check_invariants(engine, all_covered=True)

    # An operator retry re-processes exactly the same window.
    with engine.begin() as conn:
        retried = states.retry_episode(conn, failed["episode_id"], dataset=failed["dataset"])
    assert (retried["start_sequence"], retried["end_sequence"], retried["status"]) == (
        1,
        3,
        "pending",
    )
    check_invariants(engine, all_covered=True)


def test_the_invariant_checker_catches_broken_windows(engine) -> None:  # type: ignore[no-untyped-def]
    thread_id = new_thread(engine, messages=5)
    with engine.begin() as conn:
        domain.request_episode(conn, thread_id, dataset=dataset_of(conn, thread_id))
    check_invariants(engine, all_covered=True)
    with engine.begin() as conn:  # a gap: the window starts at 2
        conn.execute(
            text("UPDATE episodes SET start_sequence = 2, message_count = 4 WHERE thread_id = :id"),
            {"id": thread_id},
        )
    try:
        check_invariants(engine)
    except InvariantViolation as err:
        assert "gap before sequence 1" in str(err)
    else:
        raise AssertionError("a gap went unnoticed")
    add_messages(engine, thread_id, 1, notify=False)
    try:
        check_invariants(engine, all_covered=True)
    except InvariantViolation as err:
        assert "6..6 are in no episode" in str(err)
    else:
        raise AssertionError("an uncovered message went unnoticed")


# Random interleavings of writes, notices, triggers and sweeps at moving times.
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 2), st.integers(1, 3), st.booleans()),
        st.tuples(st.just("end"), st.integers(0, 2)),
        st.tuples(st.just("start_sibling"), st.integers(0, 2)),
        st.tuples(st.just("sweep"), st.integers(0, 90)),
        st.tuples(st.just("backstop"), st.integers(0, 2)),
        st.tuples(
            st.just("delete_timers"),
        ),
    ),
    min_size=1,
    max_size=25,
)


@hsettings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=OPS)
def test_windows_stay_contiguous_under_any_interleaving(engine, ops) -> None:  # type: ignore[no-untyped-def]
    dataset = f"ds_{uuid.uuid4().hex[:8]}"  # each example gets its own threads
    threads = [new_thread(engine, dataset) for _ in range(3)]
    sweeper = Sweeper(engine, CFG, "prop")
    clock = db_now(engine)
    for op in ops:
        kind = op[0]
        if kind == "write":
            _, i, n, notify = op
            add_messages(engine, threads[i], n, notify=notify, now=clock)
        elif kind == "end":
            with engine.begin() as conn:
                domain.request_episode(
                    conn,
                    threads[op[1]],
                    "explicit",
                    clock,
                    dataset=dataset_of(conn, threads[op[1]]),
                )
        elif kind == "start_sibling":
            with engine.begin() as conn:
                domain.record_thread_started(
                    conn, threads[op[1]], CFG, clock, dataset=dataset_of(conn, threads[op[1]])
                )
        elif kind == "sweep":
            clock += timedelta(minutes=op[1])
            sweeper.run_pass(clock, force=True)
        elif kind == "backstop":
            set_quiet_since(engine, threads[op[1]], clock - timedelta(days=2))
            sweeper.backstop(clock)
        else:  # the Scheduler lost every timer: the catch-up must recover
            with engine.begin() as conn:
                conn.execute(text("DELETE FROM scheduled_episodes"))
        check_invariants(engine)
    sweeper.run_pass(clock + timedelta(hours=1), force=True)
    check_invariants(engine, all_covered=True)


def test_a_window_of_backfilled_messages_out_of_order_spans_their_earliest_to_latest(
    engine,
) -> None:  # type: ignore[no-untyped-def]
    """Clients may backfill a thread with their own timestamps, in any order. The episode's
    span is when its messages were written — earliest to latest — not the times of its
    first and last message by sequence: a window of messages from 2023 then 1998 was
    stored as started 2023, ended 1998, and a Recall ``as_of`` 2000 returned it (a 2023
    message inside an answer 'as of 2000'), while since/until windows inside its real
    span missed it."""
    now = db_now(engine)
    thread_id = new_thread(engine, "backfill")
    written = [
        datetime(2023, 11, 14, 22, 13, tzinfo=UTC),
        datetime(1998, 7, 9, 16, 0, tzinfo=UTC),
        datetime(2010, 1, 1, tzinfo=UTC),
    ]
    batch = [
        ingest.NewMessage(role="user", content=f"said {i}", metadata={}, created_at=at)
        for i, at in enumerate(written)
    ]
    with engine.begin() as conn:
        ingest.add_messages(conn, test_vault(), thread_id, batch, INGEST)
        domain.request_episode(
            conn, thread_id, "explicit", now, dataset=dataset_of(conn, thread_id)
        )
    [episode] = episodes(engine, thread_id)
    assert (episode.started_at, episode.ended_at) == (min(written), max(written))
