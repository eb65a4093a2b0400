"""Claims, races stepped in a fixed order across connections, reclaim, leases."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from sqlalchemy import Engine, text

from episodic.services.scheduler import domain
from episodic.services.scheduler.sweeper import Sweeper
from episodic.store import episodes as states
from episodic.testing.invariants import check_invariants
from episodic.testing.processes import wait_until
from tests.scheduler.helpers import (
    add_messages,
    dataset_of,
    db_now,
    new_thread,
    settings,
    thread_row,
    timer,
    windows,
)

CFG = settings()


def due_threads(engine: Engine, n: int, messages: int = 1) -> list[uuid.UUID]:
    """n threads with uncaptured messages and a timer due an hour ago (bulk SQL)."""
    ids = [uuid.uuid4() for _ in range(n)]
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO datasets (dataset) VALUES ('bulk') ON CONFLICT DO NOTHING"))
        conn.execute(
            text(
                "INSERT INTO threads (thread_id, dataset, last_sequence, last_message_at) "
                "SELECT id, 'bulk', :m, now() - interval '2 hours' FROM unnest(:ids) id"
            ),
            {"ids": ids, "m": messages},
        )
        conn.execute(
            text(
                "INSERT INTO messages (dataset, thread_id, sequence, role, content, created_at) "
                "SELECT t.dataset, t.thread_id, s, 'user', '\\x006869'::bytea, now() "
                "FROM threads t, "
                "generate_series(1, :m) s WHERE t.thread_id = ANY(:ids)"
            ),
            {"ids": ids, "m": messages},
        )
        conn.execute(
            text(
                "INSERT INTO scheduled_episodes (thread_id, dataset, fire_at) "
                "SELECT id, 'bulk', now() - interval '1 hour' FROM unnest(:ids) id"
            ),
            {"ids": ids},
        )
    return ids


def wait_for_lock_wait(engine: Engine, application_name: str) -> None:
    """Waits (polling, no sleep-and-hope) until a session is blocked on a row lock."""

    def blocked() -> bool:
        with engine.connect() as conn:
            return bool(
                conn.execute(
                    text(
                        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND application_name = :app"
                    ),
                    {"app": application_name},
                ).first()
            )

    wait_until(blocked, timeout=20, message=f"{application_name} blocked on a lock")


def test_racing_claimers_claim_every_timer_exactly_once(engine) -> None:  # type: ignore[no-untyped-def]
    ids = due_threads(engine, 300)
    claimed: list[list[uuid.UUID]] = [[] for _ in range(4)]
    # Each claimer holds its first claim open until all four have one, so they claim side
    # by side (SKIP LOCKED) whatever the machine's load: on a loaded machine a claimer
    # started late used to find the 300 timers gone and the test failed.
    together = threading.Barrier(4, timeout=60)

    def claimer(i: int) -> None:
        first = True
        while True:
            with engine.begin() as conn:
                got = domain.claim_due_timers(conn, f"w{i}", 7)
                if first:
                    together.wait()
                    first = False
            assert len(got) <= 7
            if not got:
                return
            claimed[i].extend(t.thread_id for t in got)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(claimer, range(4)))
    everything = [t for part in claimed for t in part]
    assert sorted(everything) == sorted(ids)  # each once, none twice
    assert all(claimed), "every claimer got work (they claimed side by side)"


def test_a_message_committed_after_the_window_is_not_swallowed(engine, db_url) -> None:  # type: ignore[no-untyped-def]
    # A claims the timer and opens the episode (holding the thread lock); B's message
    # waits for the lock; A finishes. The message is not in A's window, and B's
    # RecordActivity leaves a live timer for it.
    from episodic.store.db import make_engine

    now = db_now(engine)
    thread_id = new_thread(engine)
    add_messages(engine, thread_id, 3, now=now - timedelta(hours=1))
    writer = make_engine(db_url, pool_size=1, application_name="writer-b")
    try:
        with engine.begin() as conn:
            (claimed,) = domain.claim_due_timers(conn, "replica-a", 10, now)
        conn_a = engine.connect()
        tx = conn_a.begin()
        fired = domain.fire_timer(conn_a, claimed, "replica-a", now)
        assert (fired.episode["start_sequence"], fired.episode["end_sequence"]) == (1, 3)

        b_done = threading.Event()
        b = threading.Thread(
            target=lambda: (add_messages(writer, thread_id, 1, now=now), b_done.set())
        )
        b.start()
        wait_for_lock_wait(engine, "writer-b")
        assert not b_done.is_set()
        assert fired.timer_deleted
        tx.commit()
        conn_a.close()
        b.join(20)
        assert b_done.is_set()
    finally:
        writer.dispose()

    assert windows(engine, thread_id) == [(1, 3, "inactivity")]
    assert thread_row(engine, thread_id)["last_sequence"] == 4
    live = timer(engine, thread_id)
    assert live is not None and live["claimed_at"] is None
    assert live["fire_at"] == now + CFG.auto_episode_interval
    result = Sweeper(engine, CFG).run_pass(live["fire_at"], force=True)
    assert result.episodes_created == 1
    assert windows(engine, thread_id)[-1] == (4, 4, "inactivity")
    check_invariants(engine, all_covered=True)


def test_activity_during_a_firing_keeps_the_timer_alive(engine) -> None:  # type: ignore[no-untyped-def]
    # A claims; B writes a message and its RecordActivity lands before A fires. A's window
    # includes the message (committed before the lock), and A's guarded delete fails: the
    # timer survives with B's deadline instead of vanishing.
    now = db_now(engine)
    thread_id = new_thread(engine)
    add_messages(engine, thread_id, 3, now=now - timedelta(hours=1))
    with engine.begin() as conn:
        (claimed,) = domain.claim_due_timers(conn, "replica-a", 10, now)
    add_messages(engine, thread_id, 1, now=now)
    rearmed = timer(engine, thread_id)
    assert rearmed["claimed_at"] is None and rearmed["version"] == claimed.version + 1
    with engine.begin() as conn:
        fired = domain.fire_timer(conn, claimed, "replica-a", now)
    assert (fired.episode["start_sequence"], fired.episode["end_sequence"]) == (1, 4)
    assert not fired.timer_deleted
    assert timer(engine, thread_id)["fire_at"] == now + CFG.auto_episode_interval
    # It fires later with nothing left to capture and is dropped.
    result = Sweeper(engine, CFG).run_pass(now + timedelta(hours=1), force=True)
    assert (result.episodes_created, result.timers_dropped) == (0, 1)
    assert timer(engine, thread_id) is None
    check_invariants(engine, all_covered=True)


def test_activity_while_the_episode_is_being_opened_keeps_the_timer_alive(engine) -> None:  # type: ignore[no-untyped-def]
    # A holds the thread lock mid-firing; B's RecordActivity (for a message committed just
    # before) needs no thread lock and bumps the version; A's delete then matches nothing.
    now = db_now(engine)
    thread_id = new_thread(engine)
    add_messages(engine, thread_id, 2, now=now - timedelta(hours=1))
    with engine.begin() as conn:
        (claimed,) = domain.claim_due_timers(conn, "replica-a", 10, now)
    with engine.begin() as conn_a:
        episode = states.open_episode(
            conn_a, thread_id, claimed.trigger, now, dataset=dataset_of(conn_a, thread_id)
        )
        assert episode is not None  # A holds the thread lock now
        with engine.begin() as conn_b:
            domain.record_activity(
                conn_b, thread_id, CFG, now, dataset=dataset_of(conn_b, thread_id)
            )
        assert not domain.finish_timer(conn_a, claimed, "replica-a")
    assert timer(engine, thread_id)["fire_at"] == now + CFG.auto_episode_interval


def test_opening_twice_concurrently_yields_one_window(engine, db_url) -> None:  # type: ignore[no-untyped-def]
    thread_id = new_thread(engine, messages=5)
    barrier = threading.Barrier(6)
    results = []

    def opener(i: int) -> None:
        barrier.wait()
        with engine.begin() as conn:
            results.append(
                domain.request_episode(conn, thread_id, dataset=dataset_of(conn, thread_id)).episode
            )

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(opener, range(6)))
    assert sum(r is not None for r in results) == 1
    check_invariants(engine, all_covered=True)


def test_catch_up_skips_a_thread_whose_episode_is_being_opened(engine) -> None:  # type: ignore[no-untyped-def]
    thread_id = new_thread(engine, messages=2)  # uncaptured, no timer (notice lost)
    with engine.begin() as conn_a:
        assert (
            domain.request_episode(conn_a, thread_id, dataset=dataset_of(conn_a, thread_id)).episode
            is not None
        )
        with engine.begin() as conn_b:  # while A holds the lock, not yet committed
            assert domain.catch_up(conn_b, CFG) == 0
    with engine.begin() as conn:  # after A: nothing uncaptured, still nothing to do
        assert domain.catch_up(conn, CFG) == 0
    assert timer(engine, thread_id) is None


def test_timer_claims_of_a_dead_replica_are_reclaimed_only_when_stale(engine) -> None:  # type: ignore[no-untyped-def]
    now = db_now(engine)
    stale, fresh = due_threads(engine, 2)
    with engine.begin() as conn:
        for thread_id, age in ((stale, 601), (fresh, 599)):
            conn.execute(
                text(
                    "UPDATE scheduled_episodes SET claimed_by = 'dead:1:x', "
                    "claimed_at = CAST(:now AS timestamptz) - make_interval(secs => :age) "
                    "WHERE thread_id = :id"
                ),
                {"now": now, "age": age, "id": thread_id},
            )
    sweeper = Sweeper(engine, CFG)
    result = sweeper.run_pass(now, force=True)
    assert result.claims_reclaimed == 1
    assert result.episodes_created == 1  # the reclaimed timer fired in the same pass
    assert windows(engine, stale) == [(1, 1, "inactivity")]
    assert timer(engine, fresh)["claimed_by"] == "dead:1:x"
    # The dead firer coming back cannot delete what it no longer holds.
    with engine.begin() as conn:
        ghost = domain.ClaimedTimer(stale, 1, "inactivity", now, None, dataset_of(conn, stale))
        assert not domain.fire_timer(conn, ghost, "dead:1:x", now).timer_deleted
    check_invariants(engine)


def test_shutdown_releases_claims_and_leases(engine) -> None:  # type: ignore[no-untyped-def]
    (thread_id,) = due_threads(engine, 1)
    sweeper = Sweeper(engine, CFG, "leaving")
    with engine.begin() as conn:
        domain.claim_due_timers(conn, "leaving", 10)
        assert domain.acquire_lease(conn, "scheduler.reclaim", "leaving", CFG.lease_ttl)
    sweeper.shutdown()
    assert timer(engine, thread_id)["claimed_at"] is None
    with engine.begin() as conn:
        assert domain.acquire_lease(conn, "scheduler.reclaim", "next", CFG.lease_ttl)


def test_leases_admit_one_holder_at_a_time_on_the_database_clock(engine) -> None:  # type: ignore[no-untyped-def]
    ttl = timedelta(seconds=30)
    with engine.begin() as conn:
        first = domain.acquire_lease(conn, "sweep", "a", ttl)
        assert first is not None and first.last_run_at is None and first.due(ttl)
        assert domain.acquire_lease(conn, "sweep", "b", ttl) is None
        assert domain.acquire_lease(conn, "sweep", "a", ttl) is not None  # renewal
        assert not domain.mark_lease_run(conn, "sweep", "b")
        assert domain.mark_lease_run(conn, "sweep", "a")
    with engine.begin() as conn:
        again = domain.acquire_lease(conn, "sweep", "a", ttl)
        assert again is not None and not again.due(timedelta(hours=1))
        # Expired (the holder died): the next replica takes over, keeping last_run_at.
        conn.execute(text("UPDATE leases SET expires_at = now() - interval '1 second'"))
    with engine.begin() as conn:
        taken = domain.acquire_lease(conn, "sweep", "b", ttl)
        assert taken is not None and taken.last_run_at == again.last_run_at
        assert domain.release_leases(conn, "b") == 1
    with engine.begin() as conn:
        assert domain.acquire_lease(conn, "sweep", "c", ttl) is not None


def test_racing_lease_takers_get_one_winner(engine) -> None:  # type: ignore[no-untyped-def]
    barrier = threading.Barrier(5)

    def take(i: int) -> bool:
        barrier.wait()
        with engine.begin() as conn:
            return domain.acquire_lease(conn, "race", f"r{i}", timedelta(seconds=30)) is not None

    with ThreadPoolExecutor(5) as pool:
        assert sum(pool.map(take, range(5))) == 1


def test_a_batch_fires_every_timer_and_keeps_the_one_rearmed_after_its_claim(engine) -> None:  # type: ignore[no-untyped-def]
    # One transaction fires a claimed batch: every thread gets its episode, every timer
    # still ours at the claimed version is deleted, and the timer that new activity
    # re-armed between the claim and the firing survives (its claim cleared).
    ids = due_threads(engine, 5, messages=2)
    with engine.begin() as conn:
        claimed = domain.claim_due_timers(conn, "replica-a", 10)
    assert {t.thread_id for t in claimed} == set(ids)
    rearmed = claimed[2].thread_id
    with engine.begin() as conn:
        domain.record_activity(conn, rearmed, CFG, dataset=dataset_of(conn, rearmed))
    with engine.begin() as conn:
        fired = domain.fire_timers(conn, claimed, "replica-a")
    assert [f.episode is not None for f in fired] == [True] * 5
    assert all(
        (f.episode["start_sequence"], f.episode["end_sequence"]) == (1, 2)
        for f in fired
        if f.episode is not None
    )
    assert [f.timer_deleted for f in fired] == [t.thread_id != rearmed for t in claimed]
    with engine.connect() as conn:
        left = conn.execute(
            text(
                "SELECT thread_id, claimed_by FROM scheduled_episodes WHERE thread_id = ANY(:ids)"
            ),
            {"ids": ids},
        ).all()
    assert left == [(rearmed, None)]
    check_invariants(engine)


def test_a_sweep_longer_than_its_lease_keeps_the_lease_until_it_ends(engine) -> None:  # type: ignore[no-untyped-def]
    """A singleton sweep may outrun its lease's ttl (a large dataset's statistics count
    runs for minutes): the replica renews the lease while the sweep runs, so no other
    replica takes it and runs the same sweep beside it; once the sweep ends the lease is
    left to lapse as before."""
    ttl = timedelta(seconds=3)  # renewed each second: two chances before it would lapse
    sweeper = Sweeper(engine, settings(lease_ttl=ttl), "slow")
    seen: dict[str, object] = {}

    def expiry() -> object:
        with engine.connect() as conn:
            return conn.execute(
                text("SELECT expires_at FROM leases WHERE name = 'scheduler.statistics'")
            ).scalar_one()

    def long_sweep() -> int:
        first = expiry()
        # The lease's first expiry passes while the sweep still runs (time, not work, is
        # what is waited for here: the ttl must run out).
        wait_until(lambda: db_now(engine) > first, 30, message="the ttl never ran out")
        with engine.begin() as conn:
            seen["rival"] = domain.acquire_lease(conn, "scheduler.statistics", "rival", ttl)
        seen["renewed"] = expiry() > first
        return 1

    assert sweeper._singleton("scheduler.statistics", timedelta(minutes=5), True, long_sweep) == 1
    assert seen == {"rival": None, "renewed": True}
    # Nobody renews it once the sweep is over: the rival gets it after its ttl.
    end = expiry()
    wait_until(lambda: db_now(engine) > end, 30)
    with engine.begin() as conn:
        assert domain.acquire_lease(conn, "scheduler.statistics", "rival", ttl) is not None
    # A replica whose lease was taken meanwhile stops renewing it (the rival keeps it).
    with engine.begin() as conn:
        assert not domain.renew_lease(conn, "scheduler.statistics", "slow", ttl)


def test_a_replica_that_loses_its_lease_mid_sweep_stops_renewing_and_says_so(
    engine, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A replica frozen past its ttl finds, on waking, that another took the lease: it
    counts the loss (``episodic.scheduler.leases.lost``) and leaves the lease to the new
    holder instead of taking it back."""
    from episodic import metrics

    lost: list[str] = []
    monkeypatch.setattr(metrics, "lease_lost", lost.append)
    ttl = timedelta(seconds=2)
    sweeper = Sweeper(engine, settings(lease_ttl=ttl), "frozen")

    def overtaken_sweep() -> int:
        with engine.begin() as conn:  # as if the lease lapsed while this replica slept
            conn.execute(text("UPDATE leases SET expires_at = '-infinity'"))
            assert domain.acquire_lease(conn, "scheduler.lifecycle", "rival", ttl)
        wait_until(lambda: lost, 30, message="the keeper never saw the lease taken")
        return 1

    sweeper._singleton("scheduler.lifecycle", timedelta(minutes=5), True, overtaken_sweep)
    assert lost == ["scheduler.lifecycle"]
    with engine.connect() as conn:
        holder = conn.execute(
            text("SELECT holder FROM leases WHERE name = 'scheduler.lifecycle'")
        ).scalar_one()
    assert holder == "rival"
