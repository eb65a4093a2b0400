"""Ingest → Scheduler notices are best-effort: with the Scheduler down writes still
succeed, and the Scheduler's catch-up recovers every timer and owed explicit episode."""

from __future__ import annotations

import uuid
from datetime import timedelta

from google.protobuf import timestamp_pb2
from sqlalchemy import text

from episodic.services.scheduler import domain
from episodic.testing.invariants import check_invariants
from episodic.testing.processes import wait_until
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import scheduler_service_pb2 as pb
from episodic.v1 import scheduler_service_pb2_grpc as g
from tests.scheduler.helpers import (
    dataset_of,
    db_now,
    episodes,
    new_thread,
    settings,
    timer,
    windows,
)


def messages(n: int) -> list[ipb.NewMessage]:
    return [ipb.NewMessage(role=e.ROLE_USER, content=f"m{i}") for i in range(n)]


def ts(value) -> timestamp_pb2.Timestamp:  # type: ignore[no-untyped-def]
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value)
    return out


def test_writes_succeed_while_the_scheduler_is_down_and_nothing_is_lost(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    ingest_service = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": "127.0.0.1:1"})
    with ingest_service.channel() as channel:
        ingest = ig.IngestServiceStub(channel)
        idle = ingest.CreateThread(ipb.CreateThreadRequest(dataset="u1"), timeout=10).thread
        ended = ingest.CreateThread(ipb.CreateThreadRequest(dataset="u1"), timeout=10).thread
        for thread in (idle, ended):
            stored = ingest.AddMessages(
                ipb.AddMessagesRequest(thread_id=thread.thread_id, messages=messages(3)),
                timeout=10,
            )
            assert stored.stored_count == 3
        answer = ingest.EndThread(ipb.EndThreadRequest(thread_id=ended.thread_id), timeout=10)
        assert answer.episode_queued  # owed, durably: end_requested_sequence
        assert answer.episode_id == ""  # the Scheduler did not answer
    assert episodes(engine) == []
    idle_id, ended_id = uuid.UUID(idle.thread_id), uuid.UUID(ended.thread_id)
    assert timer(engine, idle_id) is None and timer(engine, ended_id) is None

    scheduler = spawn("scheduler")
    now = db_now(engine)
    with scheduler.channel() as channel:
        stub = g.SchedulerServiceStub(channel)
        # The owed explicit episode does not wait for the idle interval.
        stub.RunSweep(pb.RunSweepRequest(as_of=ts(now)), timeout=30)
        assert windows(engine, ended_id) == [(1, 3, "explicit")]
        assert windows(engine, idle_id) == []
        interval = timedelta(minutes=30)
        stub.RunSweep(
            pb.RunSweepRequest(as_of=ts(now + interval + timedelta(minutes=1))), timeout=30
        )
    assert windows(engine, idle_id) == [(1, 3, "inactivity")]
    assert timer(engine, idle_id) is None and timer(engine, ended_id) is None
    check_invariants(engine, all_covered=True)


def test_catch_up_times_missed_activity_from_the_last_message(engine) -> None:  # type: ignore[no-untyped-def]
    cfg = settings()
    thread_id = new_thread(engine, messages=2)  # no notice reached the Scheduler
    with engine.connect() as conn:
        last_message_at = conn.execute(
            text("SELECT last_message_at FROM threads WHERE thread_id = :id"),
            {"id": thread_id},
        ).scalar_one()
    with engine.begin() as conn:
        assert domain.catch_up(conn, cfg) == 1
        assert domain.catch_up(conn, cfg) == 0  # it has a timer now
    row = timer(engine, thread_id)
    assert row["fire_at"] == last_message_at + cfg.auto_episode_interval
    assert row["trigger"] == "inactivity"


def test_ingest_notifies_a_running_scheduler(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler")
    ingest_service = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    with ingest_service.channel() as channel:
        ingest = ig.IngestServiceStub(channel)
        first = ingest.CreateThread(ipb.CreateThreadRequest(dataset="u2"), timeout=10).thread
        ingest.AddMessages(
            ipb.AddMessagesRequest(thread_id=first.thread_id, messages=messages(2)), timeout=10
        )
        first_id = uuid.UUID(first.thread_id)
        armed = wait_until(lambda: timer(engine, first_id), timeout=20, message="idle timer")
        assert armed["trigger"] == "inactivity"

        # A new thread in the dataset pulls the sibling's timer forward.
        ingest.CreateThread(ipb.CreateThreadRequest(dataset="u2"), timeout=10)
        wait_until(
            lambda: timer(engine, first_id)["trigger"] == "new_thread",
            timeout=20,
            message="sibling pulled forward",
        )
        assert timer(engine, first_id)["fire_at"] < armed["fire_at"]

        # EndThread queues the episode synchronously and reports it.
        answer = ingest.EndThread(ipb.EndThreadRequest(thread_id=first.thread_id), timeout=10)
        assert answer.episode_queued and answer.episode_id
        (episode,) = episodes(engine, first_id)
        assert str(episode["episode_id"]) == answer.episode_id
        assert episode["trigger"] == "explicit"
        assert timer(engine, first_id) is None
        again = ingest.EndThread(ipb.EndThreadRequest(thread_id=first.thread_id), timeout=10)
        assert not again.episode_queued
    check_invariants(engine, all_covered=True)


def test_lost_request_episode_on_a_thread_with_an_idle_timer_fires_now(engine) -> None:  # type: ignore[no-untyped-def]
    """EndThread committed but its RequestEpisode was lost, while the thread already had an
    idle timer 30 minutes out: the catch-up makes that timer due as an explicit one."""
    from sqlalchemy import text

    from episodic.config import SchedulerSettings
    from episodic.services.ingest import domain as ingest
    from episodic.services.scheduler import domain
    from episodic.services.scheduler.sweeper import Sweeper
    from tests.summariser.helpers import CAR_CHAT, add, make_thread

    settings = SchedulerSettings()
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT[:2])
    with engine.begin() as conn:
        domain.record_activity(
            conn, thread, settings, dataset=dataset_of(conn, thread)
        )  # the idle timer, 30 min out
        ingest.end_thread(
            conn, thread, dataset=dataset_of(conn, thread)
        )  # EndThread committed; RequestEpisode lost
        now = conn.execute(text("SELECT now()")).scalar_one()
    Sweeper(engine, settings, "replica-1").run_pass(now + timedelta(seconds=1), force=True)
    with engine.connect() as conn:
        episodes = conn.execute(
            text("SELECT trigger, start_sequence, end_sequence FROM episodes WHERE thread_id = :t"),
            {"t": thread},
        ).all()
    assert [tuple(e) for e in episodes] == [("explicit", 1, 2)]


def test_a_late_explicit_episode_still_ends_at_the_checkpoint(engine) -> None:  # type: ignore[no-untyped-def]
    """EndThread after message 2, its RequestEpisode lost, then messages 3-4: the explicit
    episode the catch-up opens covers 1-2 (where the user ended), and 3-4 wait for their
    own trigger with a timer of their own."""
    from episodic.services.ingest import domain as ingest
    from episodic.services.scheduler.sweeper import Sweeper
    from tests.scheduler.helpers import add_messages

    cfg = settings()
    thread = new_thread(engine, messages=2)
    with engine.begin() as conn:
        ingest.end_thread(
            conn, thread, dataset=dataset_of(conn, thread)
        )  # committed; the Scheduler never heard of it
    add_messages(engine, thread, 2, notify=False)  # later messages, their notices lost too
    now = db_now(engine)
    Sweeper(engine, cfg, "replica-1").run_pass(now + timedelta(seconds=1), force=True)
    assert windows(engine, thread) == [(1, 2, "explicit")]
    Sweeper(engine, cfg, "replica-1").run_pass(now + timedelta(seconds=1), force=True)
    later = timer(engine, thread)
    assert later is not None and later["trigger"] == "inactivity"
    Sweeper(engine, cfg, "replica-1").run_pass(now + cfg.auto_episode_interval * 2, force=True)
    assert windows(engine, thread) == [(1, 2, "explicit"), (3, 4, "inactivity")]
    check_invariants(engine, all_covered=True)
